package gate_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawPost posts one JSON-RPC message as a client without an SDK would.
func rawPost(t *testing.T, url, session, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"%s","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawSession initializes a session and returns its id and the negotiated
// protocol version.
func rawSession(t *testing.T, url, version string) (string, string) {
	t.Helper()
	res := rawPost(t, url, "", strings.Replace(initBody, "%s", version, 1), nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %s", res.Status)
	}
	var msg struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.NewDecoder(res.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	id := res.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatal("initialize: no Mcp-Session-Id")
	}
	if r := rawPost(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %s, want 202", r.Status)
	}
	return id, msg.Result.ProtocolVersion
}

// responseMessages reads the JSON-RPC messages of an answer, plain JSON or
// an event stream.
func responseMessages(t *testing.T, res *http.Response) []map[string]any {
	t.Helper()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return sseMessages(t, res.Body)
	}
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return []map[string]any{m}
}

// sseMessages reads the JSON-RPC messages of a text/event-stream body.
func sseMessages(t *testing.T, body io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("bad event %q: %v", data, err)
			}
			out = append(out, m)
		}
	}
	return out
}

func TestHTTPTransport(t *testing.T) {
	url, _ := setup(t)
	const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"invoice_submit","arguments":{}}}`

	t.Run("initialize negotiates a revision with sessions", func(t *testing.T) {
		_, v := rawSession(t, url, "2026-07-28")
		if v != "2025-11-25" {
			t.Errorf("negotiated %q for a 2026-07-28 client, want 2025-11-25", v)
		}
		id, _ := rawSession(t, url, "2025-06-18")
		res := rawPost(t, url, id, call, map[string]string{"MCP-Protocol-Version": "2026-07-28"})
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("unsupported MCP-Protocol-Version: %s, want 400", res.Status)
		}
	})

	t.Run("sessions are ones this process issued", func(t *testing.T) {
		if res := rawPost(t, url, "", call, nil); res.StatusCode != http.StatusBadRequest {
			t.Errorf("no session id: %s, want 400", res.Status)
		}
		if res := rawPost(t, url, "0123456789abcdef0123456789abcdef", call, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("unknown session id: %s, want 404", res.Status)
		}
		id, _ := rawSession(t, url, "2025-06-18")
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		req.Header.Set("Mcp-Session-Id", id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("DELETE: %s", res.Status)
		}
		if res := rawPost(t, url, id, call, nil); res.StatusCode != http.StatusNotFound {
			t.Errorf("ended session: %s, want 404", res.Status)
		}
	})

	t.Run("a foreign Origin is refused", func(t *testing.T) {
		res := rawPost(t, url, "", strings.Replace(initBody, "%s", "2025-06-18", 1), map[string]string{"Origin": "https://evil.example"})
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("foreign Origin: %s, want 403", res.Status)
		}
		// Another port of a loopback host is another server.
		res = rawPost(t, url, "", strings.Replace(initBody, "%s", "2025-06-18", 1), map[string]string{"Origin": "http://localhost:5173"})
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("another loopback port's Origin: %s, want 403", res.Status)
		}
	})

	t.Run("bad bodies", func(t *testing.T) {
		id, _ := rawSession(t, url, "2025-06-18")
		for body, want := range map[string]int{
			`{"jsonrpc":`:    http.StatusBadRequest,
			`[` + call + `]`: http.StatusBadRequest,
		} {
			if res := rawPost(t, url, id, body, nil); res.StatusCode != want {
				t.Errorf("%s: %s, want %d", body, res.Status, want)
			}
		}
		res := rawPost(t, url, id, call, map[string]string{"Content-Type": "text/plain"})
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("text/plain: %s, want 400", res.Status)
		}
	})

	t.Run("without a GET stream, list_changed comes ahead of the result", func(t *testing.T) {
		id, _ := rawSession(t, url, "2025-06-18")
		res := rawPost(t, url, id, call, nil)
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Fatalf("Content-Type %q, want text/event-stream", ct)
		}
		msgs := sseMessages(t, res.Body)
		if len(msgs) != 2 || msgs[0]["method"] != "notifications/tools/list_changed" || msgs[1]["result"] == nil {
			t.Fatalf("events %v, want list_changed then the result", msgs)
		}
		// A call that changes nothing carries no notification.
		res = rawPost(t, url, id, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"invoice_status","arguments":{}}}`, nil)
		if msgs := responseMessages(t, res); len(msgs) != 1 || msgs[0]["result"] == nil {
			t.Errorf("status call: %v, want the result alone", msgs)
		}
	})

	t.Run("one GET stream per session", func(t *testing.T) {
		id, _ := rawSession(t, url, "2025-06-18")
		get := func() *http.Response {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { res.Body.Close() })
			return res
		}
		first := get()
		if first.StatusCode != http.StatusOK {
			t.Fatalf("GET: %s", first.Status)
		}
		if second := get(); second.StatusCode != http.StatusConflict {
			t.Errorf("second GET: %s, want 409", second.Status)
		}
		// The call's notification goes to the stream, or with the answer
		// when the answer's stream took it first (mcp-go's transport reads
		// the session's notifications from both).
		res := rawPost(t, url, id, call, nil)
		for _, m := range responseMessages(t, res) {
			if m["method"] == "notifications/tools/list_changed" {
				return
			}
		}
		got := make(chan bool, 1)
		go func() {
			sc := bufio.NewScanner(first.Body)
			for sc.Scan() {
				if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
					got <- true
					return
				}
			}
			got <- false
		}()
		select {
		case ok := <-got:
			if !ok {
				t.Error("the GET stream ended without list_changed")
			}
		case <-time.After(time.Minute):
			t.Error("no list_changed on the GET stream within 5 s")
		}
	})
}

// TestListChangedIsNeverDropped calls a tool that changes the caller's
// list many times: each answer carries its list_changed (mcp-go's
// transport could drop it when the answer was written first).
func TestListChangedIsNeverDropped(t *testing.T) {
	url, _ := setup(t)
	id, _ := rawSession(t, url, "2025-06-18")
	for i := range 60 {
		tool := "invoice_submit"
		if i%2 == 1 {
			tool = "invoice_request_changes"
		}
		res := rawPost(t, url, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"reason":"r"}}}`, i+10, tool), nil)
		msgs := responseMessages(t, res)
		if len(msgs) != 2 || msgs[0]["method"] != "notifications/tools/list_changed" {
			t.Fatalf("call %d (%s): %v, want list_changed then the result", i, tool, msgs)
		}
	}
}
