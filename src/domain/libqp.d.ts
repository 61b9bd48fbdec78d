// libqp (quoted-printable, the codec Nodemailer and mailparser are built on) ships no types: the
// three functions domain/rewrite-html-parts.ts uses.
declare module 'libqp' {
  const libqp: {
    /** bytes (a string is read as UTF-8) to quoted-printable, CR and LF left as they are, no line wrapping */
    encode(buffer: Buffer | string): string;
    /** quoted-printable to bytes; a Buffer is read byte for byte; soft line breaks removed */
    decode(str: Buffer | string): Buffer;
    /** soft line breaks (`=\r\n`) so no line is longer than lineLength (76) */
    wrap(str: string, lineLength?: number): string;
  };
  export = libqp;
}
