// Shared by the vendor contract scripts (run by cmd/genway's
// TestVendorContract* tests): the calls to make come in CONTRACT_CALLS
// (JSON: [{name, base, key, args}], each against its own fake vendor on
// loopback), and each call's outcome, as the vendor's SDK read it, is
// printed as one JSON line {name, value} or {name, error}. The scripts
// assert nothing themselves: the Go test holds the expectations.

/** The calls to make, in order. */
export const calls = JSON.parse(process.env.CONTRACT_CALLS ?? "[]");

/** Bounds every polling loop of the scripts. */
export const maxPolls = 20;

/** pause waits ms milliseconds (polling intervals are kept short). */
export const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// describe turns whatever an SDK threw into plain JSON: its class, the
// HTTP status it carries (each SDK keeps it in its own field), its
// message and the error body it parsed, if any (each SDK in its own
// field too).
function describe(err) {
  const status = err?.status ?? err?.statusCode ?? err?.response?.status ?? 0;
  return {
    class: err?.constructor?.name ?? typeof err,
    status: typeof status === "number" ? status : 0,
    message: String(err?.message ?? err),
    body: err?.body ?? err?.error ?? null, // openai's APIError keeps the parsed error object in .error
  };
}

/**
 * run makes every call with fn(call), which returns what the SDK read,
 * and prints it (or the error the SDK threw) as one JSON line.
 */
export async function run(fn) {
  for (const call of calls) {
    let line;
    try {
      line = { name: call.name, value: (await fn(call)) ?? null };
    } catch (err) {
      line = { name: call.name, error: describe(err) };
    }
    console.log(JSON.stringify(line));
  }
}

/**
 * readAudio reads a web ReadableStream (or async iterable) of audio to its
 * end and returns its size and the number of pieces it arrived in.
 */
export async function readAudio(stream) {
  let bytes = 0;
  let chunks = 0;
  for await (const chunk of stream) {
    bytes += chunk.length;
    chunks++;
  }
  return { bytes, chunks };
}
