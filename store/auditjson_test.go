package store

import (
	"encoding/json"
	"testing"
	"time"
)

// TestAuditJSONMatchesMarshal: an audit entry is written as json.Marshal
// writes it, byte for byte, whatever its fields hold.
func TestAuditJSONMatchesMarshal(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 11, 12, 123456789, time.FixedZone("x", 3600))
	for _, e := range []AuditEntry{
		{},
		{Time: now, Machine: "invoice", MachineVersion: "abc", Handle: "h<1>&", Tool: "invoice_submit", From: "draft", To: "review", Version: 7},
		{Time: now, Machine: "m", Handle: "\u2028\x00é", Session: "session-1", Tool: "t", Event: map[string]any{"type": "ADD", "amount": 1.5, "lines": []any{"a", nil, true, map[string]any{"k": "v"}}},
			From: map[string]any{"a": "x", "b": map[string]any{"c": "y"}}, To: nil, Version: 1 << 60, Note: "a \"note\"", Settles: 3, Protocol: "2025-11-25",
			Migrated: &Migration{From: "gone", To: map[string]any{"p": "q"}, FromVersion: "v1", ToVersion: "v2"},
			Intent:   &Intent{Arguments: map[string]any{"path": "/tmp/x", "n": 2.0}, Event: "WRITE", Run: "r1"}},
		{Time: now, Intent: &Intent{}},
		{Time: now, Intent: &Intent{Run: "only"}},
		{Time: now, Event: map[string]any{}, From: []any{}, To: 1e21},
		{Time: now, Principal: &Principal{Sub: "alice<>", Roles: []string{"approver", "ops"}, Auth: "jwt"},
			Confirmed: &Confirmation{By: Principal{Sub: "bob"}, Via: "elicitation", Comment: "ok & go"}},
		{Time: now, Principal: &Principal{}, Confirmed: &Confirmation{}},
	} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendAudit(nil, e)
		if err != nil || string(got) != string(want) {
			t.Errorf("appendAudit:\n got %s (%v)\nwant %s", got, err, want)
		}
	}
}
