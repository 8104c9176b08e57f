/** A command failed; `code` is the protocol's stable snake_case error code. */
export class ViewlineError extends Error {
  constructor(code, message, reply = undefined) {
    super(`${code}: ${message}`);
    this.name = 'ViewlineError';
    this.code = code;
    this.detail = message;
    this.reply = reply;
  }
}
