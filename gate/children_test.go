package gate_test

import (
	"path/filepath"
	"testing"

	"github.com/stategate/stategate/store/badger"
)

// relay invokes a child machine that counts chunks and reports progress
// to its parent, and a callback actor that answers PING with PONG.
const relay = `import { createMachine, setup, assign, sendParent, forwardTo, fromCallback, sendTo } from 'xstate';
const loader = setup({}).createMachine({
  id: 'loader', initial: 'loading', context: ({ input }) => ({ name: input.name, n: 0 }),
  states: {
    loading: { on: { CHUNK: [
      { guard: ({ context }) => context.n >= 2, target: 'ready', actions: assign({ n: ({ context }) => context.n + 1 }) },
      { actions: [assign({ n: ({ context }) => context.n + 1 }), sendParent(({ context }) => ({ type: 'PROGRESS', n: context.n }))] },
    ] } },
    ready: { type: 'final' },
  },
  output: ({ context }) => ({ name: context.name, chunks: context.n }),
});
export default setup({
  actors: { echo: fromCallback(({ sendBack, receive }) => { receive((e) => sendBack({ type: 'PONG', n: e.n })); }) },
}).createMachine({
  id: 'relay', meta: { handleKey: 'job' }, initial: 'idle', context: { progress: 0, pongs: 0, result: null },
  invoke: { id: 'echo', src: 'echo' },
  on: { PING: { actions: sendTo('echo', ({ event }) => ({ type: 'PING', n: event.n })) },
        PONG: { actions: assign({ pongs: ({ context, event }) => context.pongs + event.n }) } },
  states: {
    idle: { on: { START: 'loading' } },
    loading: {
      invoke: { id: 'loader', src: loader, input: ({ event }) => ({ name: event.name }),
                onDone: { target: 'done', actions: assign({ result: ({ event }) => event.output }) } },
      on: { PROGRESS: { actions: assign({ progress: ({ event }) => event.n }) }, CHUNK: { actions: forwardTo('loader') } },
    },
    done: {},
  },
});`

// TestChildrenAcrossCallsAndRestarts drives an invoked child machine one
// call at a time, with a server restart in the middle: the child resumes
// where it was (XState's persisted children), and the callback actor the
// root invokes answers in every call.
func TestChildrenAcrossCallsAndRestarts(t *testing.T) {
	dir := filepath.Dir(writeMachine(t, "relay.mjs", relay))
	data := t.TempDir()
	open := func() *badger.Store { return openBadger(t, data) }
	job := map[string]any{"job": "j1"}
	with := func(kv ...any) map[string]any {
		m := map[string]any{"job": "j1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	ctxOf := func(sc map[string]any) map[string]any {
		m, _ := sc["context"].(map[string]any)
		return m
	}
	st := open()
	c := connect(t, serveStore(t, dir, st))
	c.Call("relay_start", with("name", "report"))
	c.Call("relay_chunk", job)
	if _, sc, _ := c.Call("relay_ping", with("n", 2)); ctxOf(sc)["pongs"] != 2.0 {
		t.Fatalf("ping: %v", sc)
	}
	_, sc, _ := c.Call("relay_chunk", job)
	if sc["state"] != "loading" || ctxOf(sc)["progress"] != 2.0 {
		t.Fatalf("after two chunks: %v", sc)
	}
	c.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st = open()
	t.Cleanup(func() { st.Close() })
	c = connect(t, serveStore(t, dir, st))
	_, sc, _ = c.Call("relay_chunk", job) // the third: the child is done
	result, _ := ctxOf(sc)["result"].(map[string]any)
	if sc["state"] != "done" || result["name"] != "report" || result["chunks"] != 3.0 {
		t.Fatalf("after a restart and the third chunk: %v", sc)
	}
	if _, sc, _ = c.Call("relay_ping", with("n", 5)); ctxOf(sc)["pongs"] != 7.0 {
		t.Fatalf("ping after a restart: %v", sc)
	}
}
