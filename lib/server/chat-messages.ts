/**
 * The `messages` of a chat completion request, turned into the messages the chat template renders.
 * @internal
 * @module
 */
import type { ChatMessage } from '../chat/template.js';
import { badParam } from './api-error.js';

/** Message fields that reach the template as they are (templates read them: tool calls, tool results, names). */
const PASSED = ['name', 'tool_calls', 'tool_call_id', 'reasoning_content'] as const;

/**
 * The request's messages as template messages. Content given as parts becomes text (the text parts joined by a
 * newline, as vLLM does); the `developer` role becomes `system`, the role chat templates know for it. Fields the
 * template cannot use (`refusal`, `annotations`, ... of an assistant message sent back as it came) are dropped.
 *
 * @throws ApiError 400 (param `messages`) for a malformed message or a non-text part.
 * @internal
 */
export function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) {
    throw badParam('messages', '"messages" must be a non-empty array of messages such as { "role": "user", "content": "Hi" }.');
  }
  return value.map((message: unknown, i) => {
    const where = `messages[${i}]`;
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      throw badParam('messages', `${where} must be an object with "role" and "content".`);
    }
    const m = message as Record<string, unknown>;
    if (typeof m.role !== 'string' || m.role === '') throw badParam('messages', `${where}.role must be a non-empty string.`);
    const out: ChatMessage = { role: m.role === 'developer' ? 'system' : m.role, content: content(m.content, where) };
    for (const key of PASSED) {
      if (m[key] !== undefined && m[key] !== null) (out as unknown as Record<string, unknown>)[key] = m[key];
    }
    return out;
  });
}

function content(value: unknown, where: string): string | null {
  if (value === undefined || value === null) return null; // an assistant turn that only calls tools
  if (typeof value === 'string') return value;
  if (!Array.isArray(value)) throw badParam('messages', `${where}.content must be a string or an array of content parts.`);
  return value
    .map((part: unknown, j) => {
      const p = part as { type?: unknown; text?: unknown } | null;
      if (p === null || typeof p !== 'object') throw badParam('messages', `${where}.content[${j}] must be a content part object.`);
      if (p.type !== 'text' || typeof p.text !== 'string') {
        throw badParam(
          'messages',
          `${where}.content[${j}] is a ${JSON.stringify(p.type)} part; this server takes text only ({ "type": "text", "text": "..." }).`,
          'unsupported_value',
        );
      }
      return p.text;
    })
    .join('\n');
}
