package js

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/dop251/goja"
)

// installConsole defines console in a runtime: machines' code logs with
// it (XState's own examples do, in actions), and without it every such
// action would fail. What it writes goes to the module's logger, never to
// standard output (a server's MCP channel over stdio).
func (rt *jsRuntime) installConsole() error {
	console := rt.vm.NewObject()
	for name, level := range map[string]slog.Level{
		"log": slog.LevelInfo, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError,
		"debug": slog.LevelDebug, "trace": slog.LevelDebug,
	} {
		if err := console.Set(name, func(call goja.FunctionCall) goja.Value {
			rt.consoleLog(level, call.Arguments)
			return goja.Undefined()
		}); err != nil {
			return err
		}
	}
	// The rest of the console API does nothing.
	for _, name := range []string{"dir", "table", "group", "groupCollapsed", "groupEnd", "time", "timeEnd", "timeLog", "count", "countReset", "assert"} {
		if err := console.Set(name, func(goja.FunctionCall) goja.Value { return goja.Undefined() }); err != nil {
			return err
		}
	}
	return rt.vm.Set("console", console)
}

// consoleLog writes a console call's arguments as one record: strings as
// they are, other values as JSON, separated by spaces.
func (rt *jsRuntime) consoleLog(level slog.Level, args []goja.Value) {
	log := rt.mod.console
	if log == nil || !log.Enabled(context.Background(), level) {
		return
	}
	parts := make([]string, len(args))
	for i, a := range args {
		if goja.IsString(a) {
			parts[i] = a.String()
			continue
		}
		if goja.IsUndefined(a) {
			parts[i] = "undefined"
			continue
		}
		v, err := rt.convert(a)
		if err != nil {
			parts[i] = "[" + err.Error() + "]"
			continue
		}
		if data, err := json.Marshal(v); err == nil {
			parts[i] = string(data)
		} else {
			parts[i] = a.String()
		}
	}
	log.Log(context.Background(), level, strings.Join(parts, " "), "source", "console", "file", rt.mod.file)
}
