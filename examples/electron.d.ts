// The few Electron main-process APIs that electron-main.ts uses, as Electron declares them, so the example
// type-checks without installing electron (its install downloads a binary). Real projects get these from electron.
declare module 'electron' {
  interface WebContents {
    readonly id: number;
    send(channel: string, ...args: unknown[]): void;
    isDestroyed(): boolean;
    once(event: 'destroyed', listener: () => void): this;
  }
  interface IpcMainEvent {
    sender: WebContents;
  }
  interface BrowserWindowConstructorOptions {
    width?: number;
    height?: number;
    webPreferences?: { preload?: string; contextIsolation?: boolean };
  }
  class BrowserWindow {
    constructor(options?: BrowserWindowConstructorOptions);
    readonly webContents: WebContents;
    loadFile(filePath: string): Promise<void>;
  }
  const ipcMain: {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Electron types IPC arguments as any
    on(channel: string, listener: (event: IpcMainEvent, ...args: any[]) => void): typeof ipcMain;
  };
  const app: {
    whenReady(): Promise<void>;
    quit(): void;
    on(event: 'before-quit', listener: (event: { preventDefault(): void }) => void): typeof app;
    on(event: 'window-all-closed', listener: () => void): typeof app;
  };
  export { BrowserWindow, app, ipcMain };
  export type { BrowserWindowConstructorOptions, IpcMainEvent, WebContents };
}
