// Type declarations for the Viewline Node client. The message types follow
// protocol/schema/ (test/types.test.mjs checks every schema property is declared
// here and the error codes match the server's `help`).
import { EventEmitter } from 'node:events';
import type { ConnectionOptions } from 'node:tls';

/** Every error code of protocol v1 (PROTOCOL §7) and the client's own. An app built
 * on ViewlineKit may declare more, so `ViewlineError.code` is a `string`. */
export type ErrorCode =
  | 'unknown_command' | 'bad_arguments' | 'bad_syntax' | 'bad_json' | 'bad_encoding' | 'bad_request'
  | 'line_too_long' | 'no_alert' | 'stale_alert' | 'no_cancel_action' | 'admin_disabled' | 'unknown_view'
  | 'unknown_service' | 'timeout' | 'bad_token' | 'attach_throttled' | 'busy' | 'moved' | 'unavailable'
  | 'record_unreadable' | 'server_busy' | 'login_required' | 'login_failed' | 'login_throttled' | 'nothing_to_save'
  | 'nothing_pending' | 'internal_error'
  | 'connection_closed' | 'connect_failed' | 'client_timeout' | 'aborted' | 'bad_message' | 'message_too_long';

/** `bye` codes (PROTOCOL §4): the first four end the session. */
export type ByeCode = 'quit' | 'ended' | 'expired' | 'evicted' | 'revoked' | 'moved' | 'shutdown' | 'refused';

export interface Welcome {
  type: 'welcome';
  protocol: number;
  /** The protocol's minor version, from 1.3 (PROTOCOL §9). */
  minor?: number;
  session: string;
  token: string;
  server: string;
  /** The longest line the server takes, in bytes without the `\n`: the client refuses
   * a longer command itself (`line_too_long`) instead of sending it. */
  maxLineBytes?: number;
}

export interface ErrorObject {
  code: string;
  message: string;
  /** With `moved`: `host:port` of the node that owns the session. */
  address?: string;
  /** With throttling and `server_busy`: seconds to wait. */
  retryAfter?: number;
}

export interface Reply {
  type: 'reply';
  re: string | number | null;
  ok: boolean;
  result?: Record<string, unknown>;
  error?: ErrorObject;
}

export interface Display<State = Record<string, unknown>> {
  type: 'display';
  rev: number;
  view: string;
  state: State;
}

export interface AlertAction {
  role: 'confirm' | 'cancel';
  label: string;
}

export interface AlertField {
  name: string;
  label: string;
  secure: boolean;
}

export interface Alert {
  type: 'alert';
  rev: number;
  id: string;
  title: string;
  message: string;
  actions: AlertAction[];
  /** Only when the alert asks for input. */
  fields?: AlertField[];
}

export interface Dismiss {
  type: 'dismiss';
  rev: number;
  id: string;
}

export interface Bye {
  type: 'bye';
  reason: string;
  /** Absent from servers before 1.1. */
  code?: ByeCode | string;
}

/** What an argument takes (`help`'s `arguments`, protocol 1.2). */
export type ArgumentKind = 'word' | 'text' | 'integer' | 'fields';

/** One declared argument of a command, as `help` lists it (1.2). */
export interface HelpArgument {
  name: string;
  kind: ArgumentKind | string;
  required: boolean;
  /** A required word or text that may be `""` (a password). */
  allowsEmpty?: boolean;
  /** A secret: hide it as it is typed and in logs. */
  secure?: boolean;
  /** How the usage line shows it, when not its name. */
  placeholder?: string;
  /** What it is, in a few words. */
  summary?: string;
  /** With `integer`: the bounds, both included, and what the number counts. */
  minimum?: number;
  maximum?: number;
  unit?: string;
}

/** One command as `help` lists it: what a client needs to draw a form for it. */
export interface HelpCommand {
  name: string;
  usage: string;
  summary: string;
  /** The argument names in order (protocol 1.0). */
  args: string[];
  /** Each argument's kind and bounds (1.2; absent from older servers). */
  arguments?: HelpArgument[];
  example: string;
  /** The view-model that declares it (1.2). */
  view?: string;
  /** The server's own command (1.2). */
  builtin?: boolean;
  /** Runs only on a server started with admin commands. */
  admin?: boolean;
  /** May be sent as a person types: its view-model lets the latest win (1.2). */
  live?: boolean;
  /** Fetches the next page of its view's list (1.2). */
  paging?: boolean;
  /** Its view's main action, drawn first and most prominently (1.3). */
  primary?: boolean;
}

/** One view as `help` lists it. */
export interface HelpView {
  name: string;
  /** The state's shape, for people: `{query, loading, results:[…]}`. */
  state: string;
  /** The state's booleans that are true while work is under way (1.2). */
  busy?: string[];
  /** The server's own view (`connections`). */
  builtin?: boolean;
  /** The version of its state session records keep: it survives a restart (1.3). */
  recorded?: number;
}

/** `help`'s result: every command, backend, view and error code the server has. */
export interface Help {
  commands: HelpCommand[];
  services: { name: string; summary: string }[];
  views: HelpView[];
  errors: { code: ErrorCode | string; meaning: string }[];
}

/** One session in `inspect`'s list (admin only, 1.3). */
export interface InspectedSession {
  session: string;
  rev: number;
  connections: number;
  address: string | null;
  user: string | null;
  /** The views it has shown. */
  views: string[];
  /** Alerts presented and waiting. */
  alerts: number;
  /** Task slots running. */
  tasks: string[];
  /** Present when the server keeps timelines (`--admin`). */
  ageSeconds?: number;
  lastCommand?: string;
  lastCommandAt?: string;
}

/** `inspect`'s result without a session: the node's sessions. */
export interface InspectList {
  node: { id: string; address: string } | null;
  count: number;
  /** How many of `count` were read to choose the ones listed. */
  read: number;
  recording: boolean;
  sessions: InspectedSession[];
}

/** One thing in a session's timeline. */
export type TimelineEntry = { rev: number; at: string; durationMs?: number } & (
  | {
      kind: 'command';
      command: string;
      arguments: Record<string, unknown>;
      connection: number;
      error: string | null;
      /** Runs in a row this entry stands for (absent: 1); `durationMs` is then the longest, `at` the last. */
      repeats?: number;
    }
  | { kind: 'call'; backend: string; error: string | null }
  | { kind: 'connection'; connection: number; event: string }
);

/** `inspect <session> [from-rev]`'s result: every secret argument shows as `•••`. */
export interface Inspection {
  node: { id: string; address: string } | null;
  session: InspectedSession;
  from: number;
  oldestRev: number;
  /** Each view as displayed at `from`; `null` when older than the event log reaches. */
  states: Record<string, unknown>;
  timeline: TimelineEntry[];
  /** The events sent after `from` that the log still holds. */
  events: (Display | Alert | Dismiss)[];
  recording: boolean;
}

export type Event = Display | Alert | Dismiss | Bye;
export type ServerMessage = Welcome | Reply | Event;

export interface Address {
  host: string;
  port: number;
}

/** Milliseconds to wait before reconnect round `attempt` (0 first). */
export type Backoff = (attempt: number) => number;

export interface ClientOptions {
  host?: string;
  port?: number;
  /** Every call's default wait, ms (10,000). */
  timeout?: number;
  /** Connect, TLS handshake and welcome, ms (10,000). */
  connectTimeout?: number;
  /** Resume the session after a dropped connection or a `bye` that leaves it alive. */
  reconnect?: boolean;
  /** Rounds over the nodes before giving up (8). */
  reconnectAttempts?: number;
  backoff?: Backoff;
  /** The cluster's other nodes: `'host:port'` or `{host, port}`. */
  nodes?: Array<string | Address>;
  /** `true`, or options such as `{ ca }` for a certificate to trust. */
  tls?: boolean | ConnectionOptions | null;
  onMessage?: (message: ServerMessage) => void;
  /** A `ping` after this much silence, ms; no reply in `timeout` resumes (0: off). */
  pingInterval?: number;
  /** TCP keepalive (on). */
  keepAlive?: boolean;
  /**
   * Events kept per queue (`waitFor`'s, each `events()` loop's) before the client
   * stops reading the socket (1,024). While a command or a `waitFor` waits, the
   * client reads on and a full queue's oldest event is dropped (`droppedEvents`).
   */
  maxQueuedEvents?: number;
  /**
   * The longest line taken from the server, in bytes, not counting its line ending
   * (1 MiB: the most a server holds for one connection). A longer one closes the connection with
   * `ProtocolError` (`message_too_long`), never buffered and never resumed.
   */
  maxLineBytes?: number;
}

export interface CallOptions {
  timeout?: number;
  signal?: AbortSignal;
}

export interface WaitOptions extends CallOptions {
  /** Named in the timeout error. */
  what?: string;
}

export interface AttachResult {
  session: string;
  rev: number;
  replayed: number;
  snapshot: boolean;
}

export class Client extends EventEmitter {
  static connect(options?: ClientOptions): Promise<Client>;
  readonly welcome: Welcome;
  session: string;
  token: string;
  rev: number;
  resumed: number;
  views: Record<string, Record<string, any>>;
  alert: Alert | null;
  bye: Bye | null;
  /** Events pushed out of a full queue that holds the client back, while a command or a `waitFor` waited. */
  droppedEvents: number;
  /** How many events wait in the fullest queue: at most `maxQueuedEvents`. */
  readonly queuedEvents: number;
  closed: boolean;
  command(line: string, args?: null, options?: CallOptions): Promise<Record<string, any>>;
  command(name: string, args: Record<string, unknown>, options?: CallOptions): Promise<Record<string, any>>;
  sendLine(line: string): void;
  confirm(fields?: Record<string, string> | null, options?: CallOptions & { alert?: string }): Promise<Record<string, any>>;
  cancel(options?: CallOptions & { alert?: string }): Promise<Record<string, any>>;
  /** Ends every other connection to the session and gives it a new token (kept as `token`). */
  endOthers(options?: CallOptions): Promise<{ ended: number; token: string }>;
  attach(token: string, lastRev?: number | null, options?: CallOptions): Promise<AttachResult>;
  settle(timeoutMs?: number): Promise<Record<string, any>>;
  /** The server's declarations (`help`): commands with their typed arguments, views, backends, error codes. */
  help(options?: CallOptions): Promise<Help>;
  quit(options?: CallOptions): Promise<void>;
  /**
   * The first queued event (received, not taken by a wait yet) matching `predicate`,
   * else the next to arrive. A wait takes the events up to the one it returns, so
   * successive waits move forward; the events after it, and those that arrive while
   * it waits without matching it, stay queued for later waits. A wait that rejects
   * takes nothing.
   */
  waitFor(predicate: (event: Event) => boolean, options?: WaitOptions): Promise<Event>;
  /**
   * The state of `view` matching `predicate`: at once when its latest state
   * (`views[view]`) does (taking the queued events through the view's last queued
   * display); else the first matching display queued; else the next to arrive.
   */
  waitForDisplay<State = Record<string, any>>(view: string, predicate?: (state: State) => boolean, options?: WaitOptions): Promise<State>;
  /**
   * The presented alert (`alert`) at once, even when an earlier wait went past its
   * event; else the next alert to arrive. An alert received earlier that is no longer
   * presented (answered, from here or elsewhere; dismissed) is never returned.
   */
  waitForAlert(options?: WaitOptions): Promise<Alert>;
  /**
   * Every event, in order, for one reader: first the queued events (taken), then each
   * that arrives. Leaving the loop (`break`) puts the queued events it took and did
   * not yield back in the queue, unless a wait returned a later event meanwhile.
   */
  events(options?: { signal?: AbortSignal }): AsyncGenerator<Event, void, undefined>;
  close(): Promise<void>;
  destroy(): void;
  drop(): void;
  [Symbol.asyncDispose](): Promise<void>;
}

export class ViewlineError extends Error {
  constructor(code: string, message: string, reply?: Reply);
  code: ErrorCode | string;
  reply?: Reply;
  /** @deprecated the same as `message` */
  readonly detail: string;
}
export class MovedError extends ViewlineError {
  address: Address | null;
}
export class RetryLaterError extends ViewlineError {
  retryAfter: number | null;
}
export class ThrottledError extends RetryLaterError {}
export class ServerBusyError extends RetryLaterError {}
export class ConnectionClosedError extends ViewlineError {
  bye: Bye | null;
  sessionEnded: boolean;
}
export class ConnectError extends ConnectionClosedError {}
/** The server broke the protocol; the client closed the connection for good (`message_too_long`, `bad_message`). */
export class ProtocolError extends ConnectionClosedError {
  code: 'message_too_long' | 'bad_message';
}
export class ClientTimeoutError extends ViewlineError {}
export class AbortedError extends ViewlineError {}

export function exponentialBackoff(options?: { base?: number; cap?: number; jitter?: boolean }): Backoff;
export function parseAddress(address: string | Address | null | undefined): Address | null;
export function split(line: string): string[];
export function quote(word: string): string;
/** `text` without C0 and C1 control characters (tab and newline stay): safe to print to a terminal. */
export function printable(text: string): string;
