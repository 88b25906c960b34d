package js

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dop251/goja"

	"github.com/stategate/stategate/internal/intl"
)

// Number formatting as Node's ICU does it for en-US: Intl.NumberFormat and
// Number.prototype.toLocaleString, which goja lacks (its toLocaleString
// is toString, so toLocaleString('en-US') failed with a radix error).
// This file reads their locales and options; internal/intl formats.
// Machines format amounts for people (a total in a message, a currency
// in a summary) and must print what they print on Node. Other locales,
// and options whose output needs more of ICU's data (unit, compact and
// scientific notation, currency names), are refused with an error that
// says so, rather than formatted differently.

// intlError is a RangeError or TypeError thrown by Intl.
type intlError struct {
	kind, msg string
}

func (e *intlError) Error() string { return e.msg }

func rangeErr(format string, args ...any) error {
	return &intlError{"RangeError", fmt.Sprintf(format, args...)}
}

// resolveLocale accepts the locales ICU would format as en-US here:
// undefined, an empty list, "en", "en-US" (any case), or a list whose
// first entry is one of them.
func resolveLocale(v goja.Value) error {
	if v == nil || goja.IsUndefined(v) {
		return nil
	}
	first := v
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Array" {
		if o.Get("length").ToInteger() == 0 {
			return nil
		}
		first = o.Get("0")
	}
	if !goja.IsString(first) {
		return &intlError{"TypeError", "Incorrect locale information provided"}
	}
	tag := first.String()
	switch strings.ToLower(tag) {
	case "en", "en-us":
		return nil
	}
	return rangeErr("locale %q is not available here: stategate formats numbers for en-US only (give \"en-US\" or no locale)", tag)
}

// newNumberFormat resolves locales and options as Intl.NumberFormat does.
func newNumberFormat(vm *goja.Runtime, locales, options goja.Value) (*intl.NumberFormat, error) {
	if err := resolveLocale(locales); err != nil {
		return nil, err
	}
	f := &intl.NumberFormat{Style: "decimal", CurrencyDisplay: "symbol", CurrencySign: "standard", MinInt: 1, Grouping: "auto", SignDisplay: "auto"}
	var opts *goja.Object
	if options != nil && !goja.IsUndefined(options) {
		if goja.IsNull(options) {
			return nil, &intlError{"TypeError", "Cannot convert undefined or null to object"}
		}
		opts = options.ToObject(vm)
	}
	get := func(name string) goja.Value {
		if opts == nil {
			return nil
		}
		if v := opts.Get(name); v != nil && !goja.IsUndefined(v) {
			return v
		}
		return nil
	}
	str := func(name string, allowed ...string) (string, bool, error) {
		v := get(name)
		if v == nil {
			return "", false, nil
		}
		s := v.String()
		for _, a := range allowed {
			if s == a {
				return s, true, nil
			}
		}
		return "", false, rangeErr("Value %s out of range for Intl.NumberFormat options property %s", s, name)
	}
	digits := func(name string, lo, hi int) (int, bool, error) {
		v := get(name)
		if v == nil {
			return 0, false, nil
		}
		n := v.ToFloat()
		if math.IsNaN(n) || n < float64(lo) || n > float64(hi) {
			return 0, false, rangeErr("%s value is out of range.", name)
		}
		return int(math.Floor(n)), true, nil
	}
	// Options read for their validity only: the default is the only value
	// formatted here.
	if s, ok, err := str("notation", "standard", "scientific", "engineering", "compact"); err != nil {
		return nil, err
	} else if ok && s != "standard" {
		return nil, rangeErr("notation %q is not available here: stategate formats standard notation only", s)
	}
	for _, o := range []struct{ name, def string }{{"roundingMode", "halfExpand"}, {"roundingPriority", "auto"}, {"trailingZeroDisplay", "auto"}, {"numberingSystem", "latn"}} {
		if v := get(o.name); v != nil && v.String() != o.def {
			return nil, rangeErr("%s %q is not available here: stategate formats with %q only", o.name, v.String(), o.def)
		}
	}
	if v := get("roundingIncrement"); v != nil && v.ToFloat() != 1 {
		return nil, rangeErr("roundingIncrement %v is not available here: stategate rounds to 1 only", v)
	}
	style, ok, err := str("style", "decimal", "percent", "currency", "unit")
	if err != nil {
		return nil, err
	}
	if ok {
		f.Style = style
	}
	if f.Style == "unit" {
		return nil, rangeErr("style \"unit\" is not available here: stategate formats decimal, percent and currency styles only")
	}
	if v := get("currency"); v != nil {
		code := v.String()
		if len(code) != 3 || strings.IndexFunc(code, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') }) >= 0 {
			return nil, rangeErr("Invalid currency code : %s", code)
		}
		f.Currency = strings.ToUpper(code)
	}
	if d, ok, err := str("currencyDisplay", "symbol", "narrowSymbol", "code", "name"); err != nil {
		return nil, err
	} else if ok {
		if d == "name" {
			return nil, rangeErr("currencyDisplay \"name\" is not available here: stategate shows a currency's symbol or code")
		}
		f.CurrencyDisplay = d
	}
	if s, ok, err := str("currencySign", "standard", "accounting"); err != nil {
		return nil, err
	} else if ok {
		f.CurrencySign = s
	}
	if f.Style == "currency" && f.Currency == "" {
		return nil, &intlError{"TypeError", "Currency code is required with currency style."}
	}
	if f.MinInt, ok, err = digits("minimumIntegerDigits", 1, 21); err != nil {
		return nil, err
	} else if !ok {
		f.MinInt = 1
	}
	// Fraction digits: the style's defaults, adjusted to those given.
	defMin, defMax := 0, 3
	switch f.Style {
	case "percent":
		defMax = 0
	case "currency":
		d := intl.CurrencyOf(f.Currency).Digits
		defMin, defMax = d, d
	}
	minSD, hasMinSD, err := digits("minimumSignificantDigits", 1, 21)
	if err != nil {
		return nil, err
	}
	maxSD, hasMaxSD, err := digits("maximumSignificantDigits", 1, 21)
	if err != nil {
		return nil, err
	}
	minFD, hasMinFD, err := digits("minimumFractionDigits", 0, 100)
	if err != nil {
		return nil, err
	}
	maxFD, hasMaxFD, err := digits("maximumFractionDigits", 0, 100)
	if err != nil {
		return nil, err
	}
	if hasMinSD || hasMaxSD {
		if !hasMinSD {
			minSD = 1
		}
		if !hasMaxSD {
			maxSD = 21
		}
		if minSD > maxSD {
			return nil, rangeErr("maximumSignificantDigits value is out of range.")
		}
		f.MinSD, f.MaxSD = minSD, maxSD
	}
	switch {
	case hasMinFD && hasMaxFD:
		if minFD > maxFD {
			return nil, rangeErr("maximumFractionDigits value is out of range.")
		}
	case hasMinFD:
		maxFD = max(defMax, minFD)
	case hasMaxFD:
		minFD = min(defMin, maxFD)
	default:
		minFD, maxFD = defMin, defMax
	}
	f.MinFD, f.MaxFD = minFD, maxFD
	if v := get("useGrouping"); v != nil {
		if b, isBool := v.Export().(bool); isBool {
			f.Grouping = "always"
			if !b {
				f.Grouping = "false"
			}
		} else {
			switch s := v.String(); s {
			case "always", "auto", "min2":
				f.Grouping = s
			case "true", "false":
				f.Grouping = "auto"
			default:
				return nil, rangeErr("Value %s out of range for Intl.NumberFormat options property useGrouping", s)
			}
		}
	}
	if s, ok, err := str("signDisplay", "auto", "never", "always", "exceptZero", "negative"); err != nil {
		return nil, err
	} else if ok {
		f.SignDisplay = s
	}
	return f, nil
}

// resolvedOptions is resolvedOptions() of a format, as ICU orders it.
func resolvedOptions(vm *goja.Runtime, f *intl.NumberFormat) *goja.Object {
	o := vm.NewObject()
	set := func(k string, v any) { _ = o.Set(k, v) }
	set("locale", "en-US")
	set("numberingSystem", "latn")
	set("style", f.Style)
	if f.Style == "currency" {
		set("currency", f.Currency)
		set("currencyDisplay", f.CurrencyDisplay)
		set("currencySign", f.CurrencySign)
	}
	set("minimumIntegerDigits", f.MinInt)
	set("minimumFractionDigits", f.MinFD)
	set("maximumFractionDigits", f.MaxFD)
	if f.MaxSD > 0 {
		set("minimumSignificantDigits", f.MinSD)
		set("maximumSignificantDigits", f.MaxSD)
	}
	switch f.Grouping {
	case "false":
		set("useGrouping", false)
	default:
		set("useGrouping", f.Grouping)
	}
	set("notation", "standard")
	set("signDisplay", f.SignDisplay)
	set("roundingMode", "halfExpand")
	set("roundingIncrement", 1)
	set("trailingZeroDisplay", "auto")
	set("roundingPriority", "auto")
	return o
}

// installIntl defines Intl.NumberFormat and makes Number's toLocaleString
// use it.
func (rt *jsRuntime) installIntl() error {
	vm := rt.vm
	throw := func(err error) {
		var ie *intlError
		if errors.As(err, &ie) {
			ctor := vm.Get(ie.kind).ToObject(vm)
			obj, cerr := vm.New(ctor, vm.ToValue(ie.msg))
			if cerr == nil {
				panic(obj)
			}
		}
		panic(rt.newError(err.Error()))
	}
	toNumber := func(v goja.Value) float64 {
		if v == nil || goja.IsUndefined(v) {
			return math.NaN()
		}
		return v.ToFloat()
	}
	// makeFormat resolves a format and gives its methods; the NumberFormat
	// function around it (with or without new) sets them on the object.
	makeFormat := func(call goja.FunctionCall) goja.Value {
		f, err := newNumberFormat(vm, call.Argument(0), call.Argument(1))
		if err != nil {
			throw(err)
		}
		// format is a bound function, as in ICU: nf.format can be passed
		// around (array.map(nf.format)).
		format := vm.ToValue(func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(f.Format(toNumber(c.Argument(0))))
		})
		resolved := vm.ToValue(func(goja.FunctionCall) goja.Value { return resolvedOptions(vm, f) })
		return vm.ToValue([]goja.Value{format, resolved})
	}
	wrap, err := vm.RunString(`(make) => {
		function NumberFormat(locales, options) {
			const [format, resolvedOptions] = make(locales, options);
			const self = new.target ? this : Object.create(NumberFormat.prototype);
			Object.defineProperty(self, 'format', { value: format });
			Object.defineProperty(self, 'resolvedOptions', { value: resolvedOptions });
			return self;
		}
		return NumberFormat;
	}`)
	if err != nil {
		return err
	}
	wrapFn, _ := goja.AssertFunction(wrap)
	ctorV, err := wrapFn(goja.Undefined(), vm.ToValue(makeFormat))
	if err != nil {
		return err
	}
	intlObj := vm.NewObject()
	ctor := ctorV.ToObject(vm)
	_ = ctor.Set("supportedLocalesOf", func(c goja.FunctionCall) goja.Value {
		var out []any
		if err := resolveLocale(c.Argument(0)); err == nil && !goja.IsUndefined(c.Argument(0)) {
			out = append(out, "en-US")
		}
		return vm.ToValue(out)
	})
	if err := intlObj.Set("NumberFormat", ctor); err != nil {
		return err
	}
	if err := vm.Set("Intl", intlObj); err != nil {
		return err
	}
	// Number.prototype.toLocaleString(locales, options).
	proto := vm.Get("Number").ToObject(vm).Get("prototype").ToObject(vm)
	return proto.DefineDataProperty("toLocaleString", vm.ToValue(func(c goja.FunctionCall) goja.Value {
		this := c.This
		if o, ok := this.(*goja.Object); (ok && o.ClassName() != "Number") || (!ok && !isNumber(this)) {
			panic(vm.NewTypeError("Number.prototype.toLocaleString requires that 'this' be a Number"))
		}
		f, err := newNumberFormat(vm, c.Argument(0), c.Argument(1))
		if err != nil {
			throw(err)
		}
		return vm.ToValue(f.Format(this.ToFloat()))
	}), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

func isNumber(v goja.Value) bool {
	switch v.Export().(type) {
	case int64, float64:
		return true
	}
	return false
}
