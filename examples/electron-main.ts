// Electron main process: one engine in main serves every window; a renderer asks over IPC and gets the text back
// as it is generated. Channels: renderer → main 'llm:generate' (prompt), 'llm:stop'; main → renderer
// 'llm:progress', 'llm:ready', 'llm:chunk' (text), 'llm:done' ({ text, finishReason, usage }), 'llm:error'.
// Run as an app's main script (`electron electron-main.js MODEL_DIR`, plus a preload that exposes the channels).
// Packaged with ASAR: unpack vtengine's prebuilds (and models/default) as the README's Electron section says.
import { BrowserWindow, type IpcMainEvent, app, ipcMain } from 'electron';
import { DEFAULT_MODEL_DIR, Engine, EngineError, type Generation } from 'vtengine';

let engine: Engine | undefined;
const running = new Map<number, Generation>(); // by webContents id: one generation per window at a time

ipcMain.on('llm:generate', async ({ sender }: IpcMainEvent, prompt: string) => {
  running.get(sender.id)?.abort();
  if (!engine) return sender.send('llm:error', { code: 'ERR_NOT_READY', message: 'The model is still loading.' });
  let gen: Generation | undefined;
  try {
    gen = engine.generate({ prompt }, { maxTokens: 512, temperature: 0.7 }); // throws at once on a bad input
    running.set(sender.id, gen);
    sender.once('destroyed', () => gen?.abort()); // a closed window stops its generation and frees its memory
    for await (const chunk of gen) if (!sender.isDestroyed()) sender.send('llm:chunk', chunk.text);
    const { text, finishReason, usage } = await gen; // an aborted generation resolves too: finishReason 'abort'
    if (!sender.isDestroyed()) sender.send('llm:done', { text, finishReason, usage });
  } catch (err) {
    // Errors are data: send the stable code across, not the object.
    const { code, message } = err instanceof EngineError ? err : { code: 'ERR_INTERNAL', message: String(err) };
    if (!sender.isDestroyed()) sender.send('llm:error', { code, message });
  } finally {
    if (running.get(sender.id) === gen) running.delete(sender.id);
  }
});
ipcMain.on('llm:stop', ({ sender }: IpcMainEvent) => running.get(sender.id)?.abort());

app.on('window-all-closed', () => app.quit());
app.on('before-quit', (event) => {
  if (!engine) return; // dispose() ends every live generation and the engine's thread before the app exits
  event.preventDefault();
  void engine.dispose().finally(() => app.quit());
  engine = undefined;
});

await app.whenReady();
const win = new BrowserWindow({ width: 900, height: 700 });
void win.loadFile('index.html');
engine = await Engine.load(process.argv[2] ?? DEFAULT_MODEL_DIR, { onProgress: (p) => win.webContents.send('llm:progress', p) });
win.webContents.send('llm:ready', engine.modelInfo);
