package store

import (
	"strconv"

	"github.com/stategate/stategate/internal/jsonenc"
)

// appendAudit appends an audit entry's JSON to b, byte for byte as
// json.Marshal writes an AuditEntry, without reflection (an entry is
// written with every save).
func appendAudit(b []byte, e AuditEntry) ([]byte, error) {
	var err error
	str := func(key, v string, omitEmpty bool) {
		if omitEmpty && v == "" {
			return
		}
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		b = jsonenc.AppendString(b, v)
	}
	val := func(key string, v any) {
		if err != nil {
			return
		}
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		b, err = jsonenc.Append(b, v)
	}
	t, terr := e.Time.MarshalJSON()
	if terr != nil {
		return b, terr
	}
	b = append(b, `{"time":`...)
	b = append(b, t...)
	str("machine", e.Machine, false)
	str("machineVersion", e.MachineVersion, false)
	str("handle", e.Handle, false)
	str("session", e.Session, true)
	str("tool", e.Tool, false)
	if len(e.Event) > 0 {
		val("event", e.Event)
	}
	val("from", e.From)
	val("to", e.To)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, e.Version, 10)
	if e.Migrated != nil {
		b = append(b, `,"migrated":{"from":`...)
		if b, err = jsonenc.Append(b, e.Migrated.From); err != nil {
			return b, err
		}
		b = append(b, `,"to":`...)
		if b, err = jsonenc.Append(b, e.Migrated.To); err != nil {
			return b, err
		}
		b = append(b, `,"fromVersion":`...)
		b = jsonenc.AppendString(b, e.Migrated.FromVersion)
		b = append(b, `,"toVersion":`...)
		b = jsonenc.AppendString(b, e.Migrated.ToVersion)
		b = append(b, '}')
	}
	str("note", e.Note, true)
	if e.Intent != nil {
		b = append(b, `,"intent":{`...)
		first := true
		sep := func() {
			if !first {
				b = append(b, ',')
			}
			first = false
		}
		if len(e.Intent.Arguments) > 0 {
			sep()
			b = append(b, `"arguments":`...)
			if b, err = jsonenc.Append(b, e.Intent.Arguments); err != nil {
				return b, err
			}
		}
		if e.Intent.Event != "" {
			sep()
			b = append(b, `"event":`...)
			b = jsonenc.AppendString(b, e.Intent.Event)
		}
		if e.Intent.Run != "" {
			sep()
			b = append(b, `"run":`...)
			b = jsonenc.AppendString(b, e.Intent.Run)
		}
		b = append(b, '}')
	}
	if e.Settles != 0 {
		b = append(b, `,"settles":`...)
		b = strconv.AppendUint(b, e.Settles, 10)
	}
	str("protocol", e.Protocol, true)
	if e.Principal != nil {
		b = append(b, `,"principal":`...)
		b = appendPrincipal(b, *e.Principal)
	}
	if c := e.Confirmed; c != nil {
		b = append(b, `,"confirmed":{"by":`...)
		b = appendPrincipal(b, c.By)
		b = append(b, `,"via":`...)
		b = jsonenc.AppendString(b, c.Via)
		if c.Comment != "" {
			b = append(b, `,"comment":`...)
			b = jsonenc.AppendString(b, c.Comment)
		}
		b = append(b, '}')
	}
	return append(b, '}'), err
}

func appendPrincipal(b []byte, p Principal) []byte {
	b = append(b, `{"sub":`...)
	b = jsonenc.AppendString(b, p.Sub)
	if len(p.Roles) > 0 {
		b = append(b, `,"roles":[`...)
		for i, r := range p.Roles {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, r)
		}
		b = append(b, ']')
	}
	if p.Auth != "" {
		b = append(b, `,"auth":`...)
		b = jsonenc.AppendString(b, p.Auth)
	}
	return append(b, '}')
}
