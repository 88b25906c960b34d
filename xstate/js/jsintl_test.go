package js

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// TestNumberFormat formats the numbers of testdata/intl/numbers.json,
// recorded from Node's Intl (scripts/gen-intl-cases.mjs), and compares.
func TestNumberFormat(t *testing.T) {
	data, err := os.ReadFile("testdata/intl/numbers.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []struct {
			X       any             `json:"x"`
			Locales json.RawMessage `json:"locales"`
			Options json.RawMessage `json:"options"`
			Out     *string         `json:"out"`
			Error   string          `json:"error"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	vm := goja.New()
	rt := &jsRuntime{vm: vm}
	if err := rt.installIntl(); err != nil {
		t.Fatal(err)
	}
	format, err := vm.RunString(`(x, locales, options) => {
		try {
			return locales === undefined ? new Intl.NumberFormat('en-US', options ?? undefined).format(x) : x.toLocaleString(locales ?? undefined, options ?? undefined);
		} catch (e) {
			return {error: e.constructor.name, message: e.message};
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := goja.AssertFunction(format)
	parse := func(raw json.RawMessage) goja.Value {
		if len(raw) == 0 {
			return goja.Undefined()
		}
		v, err := vm.RunString("(" + string(raw) + ")")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range golden.Cases {
		var x float64
		switch v := c.X.(type) {
		case float64:
			x = v
		case string:
			if v == "-0" {
				x = math.Copysign(0, -1)
			} else {
				x, _ = strconv.ParseFloat(v, 64)
			}
		}
		got, err := fn(goja.Undefined(), vm.ToValue(x), parse(c.Locales), parse(c.Options))
		if err != nil {
			t.Fatal(err)
		}
		var gotErr string
		if o, ok := got.(*goja.Object); ok {
			gotErr = o.Get("error").String() + ": " + o.Get("message").String()
		}
		switch {
		case c.Error != "":
			if gotErr == "" || gotErr[:len(c.Error)] != c.Error {
				t.Errorf("%v with %s: got %v, want a %s", c.X, c.Options, got, c.Error)
			}
		case gotErr != "":
			t.Errorf("%v with %s %s: %s, want %q", c.X, c.Locales, c.Options, gotErr, *c.Out)
		case got.String() != *c.Out:
			t.Errorf("%v with %s %s: got %q, want %q", c.X, c.Locales, c.Options, got.String(), *c.Out)
		}
	}
}

// TestNumberFormatRefuses checks that what is not formatted as Node
// would is refused with an error that says why.
func TestNumberFormatRefuses(t *testing.T) {
	vm := goja.New()
	rt := &jsRuntime{vm: vm}
	if err := rt.installIntl(); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		`(5).toLocaleString('de-DE')`:                                                             `RangeError: locale "de-DE" is not available here`,
		`new Intl.NumberFormat('en-US', {notation: 'compact'})`:                                   `RangeError: notation "compact" is not available here`,
		`(5).toLocaleString('en-US', {style: 'unit', unit: 'meter'})`:                             `RangeError: style "unit" is not available here`,
		`new Intl.NumberFormat(undefined, {style: 'currency'})`:                                   `TypeError: Currency code is required`,
		`(5).toLocaleString('en', {style: 'currency', currency: 'USD', currencyDisplay: 'name'})`: `RangeError: currencyDisplay "name" is not available here`,
		`Number.prototype.toLocaleString.call('5')`:                                               `TypeError: Number.prototype.toLocaleString requires`,
	} {
		_, err := vm.RunString(src)
		var ex *goja.Exception
		if !errors.As(err, &ex) || !strings.HasPrefix(ex.Value().String(), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
}
