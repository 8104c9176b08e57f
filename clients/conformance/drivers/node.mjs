// The Node client's conformance driver: runs one scenario's steps with `Client`
// (clients/conformance/README.md has the protocol; drivers/python.py is the reference).
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, ClientTimeoutError, ConnectionClosedError, ProtocolError, ViewlineError } from '../../node/src/viewline.mjs';

class StepFailed extends Error {
  /** `timedOut`: the step's wait ended with its timeout (what `expect_error: "timeout"` asks for). */
  constructor(message, { timedOut = false } = {}) {
    super(message);
    this.timedOut = timedOut;
  }
}

/** The scenarios' one rule: an object matches when each expected key matches, an
 * array when it has as many elements and each matches, anything else when equal. */
function matches(expected, actual) {
  const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);
  if (isObject(expected)) {
    return isObject(actual) && Object.entries(expected).every(([key, value]) => Object.hasOwn(actual, key) && matches(value, actual[key]));
  }
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((value, i) => matches(value, actual[i]));
  }
  return expected === actual;
}

/** `{n}`: the repeat's count (1, 2, …); `{x:N}`: N letters x. */
const expand = (line, n) => line.replace(/\{x:(\d+)\}/g, (_, count) => 'x'.repeat(Number(count))).replaceAll('{n}', String(n));

const show = (value) => (JSON.stringify(value) ?? 'null').slice(0, 300);

/** A command's outcome as the scenarios write it: {ok, result} or {ok: false, error: code}. */
async function outcome(call) {
  try {
    return { ok: true, result: await call() };
  } catch (error) {
    if (error instanceof ClientTimeoutError) return { ok: false, error: 'timeout' };
    if (error instanceof ProtocolError) return { ok: false, error: 'protocol_error', message: error.message };
    if (error instanceof ConnectionClosedError) return { ok: false, error: error.code, message: error.message };
    if (error instanceof ViewlineError) return { ok: false, error: error.code };
    throw error;
  }
}

/** Runs `wait`; a timeout or a closed client fails the step with `what` and the error. */
async function waiting(what, wait) {
  try {
    return await wait();
  } catch (error) {
    if (error instanceof ClientTimeoutError || error instanceof ConnectionClosedError) {
      throw new StepFailed(`${what}: ${error.message}`, { timedOut: error instanceof ClientTimeoutError });
    }
    throw error;
  }
}

class Driver {
  constructor(setup, nextLine) {
    this.setup = setup;
    this.nextLine = nextLine;
    this.clients = new Map();
  }

  endpoints(via) {
    return this.setup[via === 'direct' ? 'direct' : 'nodes'].map(({ host, port }) => ({ host, port }));
  }

  client(step) {
    const client = this.clients.get(step.client);
    if (!client) throw new StepFailed(`no client ${step.client} (connect it first)`);
    return client;
  }

  check(step, got) {
    const expected = step.expect ?? { ok: true };
    if ('error' in expected) {
      if (got.error !== expected.error) throw new StepFailed(`expected error ${expected.error}, got ${show(got)}`);
    } else if (!matches(expected, got)) {
      throw new StepFailed(`expected ${JSON.stringify(expected)}, got ${show(got)}`);
    }
  }

  /** Runs a step; a `wait_*` step with `expect_error` (`timeout`) must end with that error instead. */
  async run(step) {
    if (!step.op.startsWith('wait_') || !('expect_error' in step)) return this.act(step);
    try {
      await this.act(step);
    } catch (error) {
      if (step.expect_error === 'timeout' && error instanceof StepFailed && error.timedOut) return;
      throw error;
    }
    throw new StepFailed(`expected the wait to end with ${step.expect_error}`);
  }

  async act(step) {
    const timeout = step.timeout_ms ?? 10_000;
    switch (step.op) {
      case 'connect': {
        const endpoints = this.endpoints(step.via ?? 'proxy');
        const { host, port } = endpoints[step.node ?? 0];
        const nodes = endpoints.filter((e) => !(e.host === host && e.port === port));
        this.clients.set(step.client, await Client.connect({
          host, port, reconnect: step.reconnect ?? true, nodes, timeout, connectTimeout: timeout,
          backoff: (round) => Math.min(100 * 2 ** round, 1000),
        }));
        break;
      }
      case 'send': {
        const client = this.client(step);
        let got = {};
        for (let n = 1; n <= (step.repeat ?? 1); n++) {
          const line = expand(step.line, n);
          got = await outcome(() => client.command(line, null, { timeout }));
          if (!got.ok && !('error' in (step.expect ?? {}))) break;
        }
        this.check(step, got);
        break;
      }
      case 'attach': {
        const client = this.client(step);
        const owner = this.client({ client: step.to });
        this.check(step, await outcome(() => client.attach(owner.token, undefined, { timeout })));
        break;
      }
      case 'confirm': {
        const client = this.client(step);
        this.check(step, await outcome(() => client.confirm(step.fields, { timeout })));
        break;
      }
      case 'cancel': {
        const client = this.client(step);
        this.check(step, await outcome(() => client.cancel({ timeout })));
        break;
      }
      case 'wait_display': {
        const where = step.where ?? {};
        const client = this.client(step);
        await waiting(`no display of ${step.view} matching ${JSON.stringify(where)}`,
          () => client.waitForDisplay(step.view, (state) => matches(where, state), { timeout }));
        break;
      }
      case 'wait_alert': {
        const client = this.client(step);
        const alert = await waiting('no alert', () => client.waitForAlert({ timeout }));
        if (!matches(step.expect ?? {}, alert)) throw new StepFailed(`the alert ${show(alert)} does not match ${JSON.stringify(step.expect)}`);
        break;
      }
      case 'wait_dismiss': {
        const client = this.client(step);
        await waiting('no dismiss', () => client.waitFor((m) => m.type === 'dismiss', { timeout, what: 'a dismiss' }));
        break;
      }
      case 'wait_closed': {
        const client = this.client(step);
        try {
          await client.waitFor(() => false, { timeout, what: 'the end of the session' });
          throw new StepFailed('the client is still open');
        } catch (error) {
          if (error instanceof ClientTimeoutError) throw new StepFailed('the client is still open');
          if (!(error instanceof ConnectionClosedError)) throw error;
        }
        const code = client.bye?.code ?? null;
        if (code !== step.bye) throw new StepFailed(`expected bye ${step.bye}, got ${code}`);
        break;
      }
      case 'expect_alert': {
        const presented = this.client(step).alert;
        if (step.alert === null) {
          if (presented !== null) throw new StepFailed(`an alert is still presented: ${show(presented)}`);
        } else if (presented === null || !matches(step.alert, presented)) {
          throw new StepFailed(`presented ${show(presented)}, expected ${JSON.stringify(step.alert)}`);
        }
        break;
      }
      case 'expect_view': {
        const { views } = this.client(step);
        const state = Object.hasOwn(views, step.view) ? views[step.view] : null;
        if (!matches(step.where, state)) throw new StepFailed(`${step.view} is ${show(state)}, expected ${JSON.stringify(step.where)}`);
        break;
      }
      case 'expect_client': {
        const { resumed } = this.client(step);
        if (resumed < (step.resumed_at_least ?? 0) || resumed > (step.resumed_at_most ?? resumed)) throw new StepFailed(`resumed ${resumed} times`);
        break;
      }
      case 'sleep':
        await sleep(step.ms);
        break;
      case 'control': {
        process.stdout.write(JSON.stringify({ control: step }) + '\n');
        const answer = JSON.parse((await this.nextLine()) ?? '{}');
        if (!answer.done) throw new StepFailed(`the runner could not do it: ${answer.error}`);
        break;
      }
      default:
        throw new StepFailed(`unknown op ${JSON.stringify(step.op)}`);
    }
  }

  close() {
    for (const client of this.clients.values()) client.destroy();
  }
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const nextLine = async () => (await lines.next()).value;
  const setup = JSON.parse(await nextLine());
  const driver = new Driver(setup, nextLine);
  let result = { pass: true };
  for (const [index, step] of setup.scenario.steps.entries()) {
    try {
      await driver.run(step);
    } catch (error) {  // an unexpected error is a failure of the client, by name
      const message = error instanceof StepFailed ? error.message : `${error?.name ?? 'Error'}: ${error?.message ?? error}`;
      result = { pass: false, step: index, op: step.op, message };
      break;
    }
  }
  driver.close();
  process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(result.pass ? 0 : 1));
}

main();
