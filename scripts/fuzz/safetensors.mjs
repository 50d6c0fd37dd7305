// Reading and writing safetensors files at the byte level, loosely enough to write the malformed files the fuzzer
// needs: a header is kept as an ordered list of [name, entry] pairs (so duplicate names can be written) and is
// serialised by hand rather than by JSON.stringify of an object.
import { readFileSync } from 'node:fs';
import { stringify } from './raw-json.mjs';

/** Byte sizes of the dtypes the safetensors format defines (the engine computes with BF16, F16 and F32 only). */
export const DTYPE_SIZES = {
  BOOL: 1, U8: 1, I8: 1, F8_E5M2: 1, F8_E4M3: 1, I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4,
  I64: 8, U64: 8, F64: 8,
};

/**
 * Splits a well-formed safetensors file (a base checkpoint's, never a mutant's) into its parts.
 * @returns {{ entries: Array<[string, any]>, data: Buffer }}
 */
export function readSafetensors(path) {
  const bytes = readFileSync(path);
  const len = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + len).toString('utf8'));
  return { entries: Object.entries(header), data: bytes.subarray(8 + len) };
}

/** The header's JSON text, with entries in order (duplicates kept) and values as given. */
export function headerText(entries) {
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${stringify(v)}`).join(',')}}`;
}

/**
 * A complete file: the u64 length, the header bytes padded with spaces to 8 bytes (as the reference writer does),
 * then the data. `lengthField` overrides the length written (a lie about the header's size).
 */
export function encodeSafetensors(headerBytes, data, lengthField) {
  const pad = (8 - (headerBytes.length % 8)) % 8;
  const header = Buffer.concat([headerBytes, Buffer.alloc(pad, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(lengthField ?? BigInt(header.length));
  return Buffer.concat([len, header, data]);
}

/** Tensor entries (not __metadata__) of a header's entry list. */
export function tensorEntries(entries) {
  return entries.filter(([name]) => name !== '__metadata__');
}
