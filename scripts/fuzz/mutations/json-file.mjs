// Whole-file damage for any JSON file of a checkpoint: another JSON type at the top, cut short, empty, bytes that
// are not UTF-8, a byte-order mark, or the file deleted.
import { stringify } from '../raw-json.mjs';

/** Mutations of `file` as a whole, kinds `${prefix}/...`. */
export function jsonFileMutations(file, prefix) {
  const applies = (base) => base.files.includes(file);
  const text = (m) => m.bytes(file)?.toString('latin1');
  return [
    {
      kind: `${prefix}/non-object`,
      applies,
      apply(m, rng) {
        const value = rng.pick([[], [{}], 5, 'x', null, true]);
        m.setJson(file, value);
        return `file = ${stringify(value)}`;
      },
    },
    {
      kind: `${prefix}/damaged-text`,
      applies,
      apply(m, rng) {
        const t = text(m);
        if (t === undefined) return null;
        const at = rng.int(0, Math.max(0, t.length - 1));
        switch (rng.int(0, 4)) {
          case 0:
            m.setBytes(file, Buffer.from(t.slice(0, at), 'latin1'));
            return `cut at byte ${at} of ${t.length}`;
          case 1:
            m.setBytes(file, Buffer.alloc(0));
            return 'empty file';
          case 2: {
            // Inside a string if we can find one: the JSON stays well-formed but is not UTF-8.
            const quote = t.indexOf('"', at);
            const pos = quote >= 0 ? quote + 1 : at;
            const bad = rng.pick([[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]);
            m.setBytes(file, Buffer.concat([Buffer.from(t.slice(0, pos), 'latin1'), Buffer.from(bad), Buffer.from(t.slice(pos), 'latin1')]));
            return `bytes ${bad.map((b) => b.toString(16)).join(' ')} (not UTF-8) at byte ${pos}`;
          }
          case 3:
            m.setBytes(file, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(t, 'latin1')]));
            return 'UTF-8 byte-order mark before the JSON';
          default:
            m.setBytes(file, Buffer.from(`${t}\n{}`, 'latin1'));
            return 'trailing "{}" after the document';
        }
      },
    },
    {
      kind: `${prefix}/delete-file`,
      applies,
      apply(m) {
        m.remove(file);
        return `delete ${file}`;
      },
    },
  ];
}
