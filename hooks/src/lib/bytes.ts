/**
 * The chunks of a byte stream as Buffers. A stream without an encoding (an HTTP body, a child's
 * stdout) yields Buffers, but its iterator is typed `any`; this says what each chunk is.
 */
export async function* bufferChunks(stream: AsyncIterable<unknown>): AsyncGenerator<Buffer> {
  for await (const chunk of stream) {
    if (Buffer.isBuffer(chunk)) yield chunk;
    else if (chunk instanceof Uint8Array) yield Buffer.from(chunk);
    else yield Buffer.from(String(chunk));
  }
}
