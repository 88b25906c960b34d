package js

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// Number formatting as Node's ICU does it for en-US: Intl.NumberFormat and
// Number.prototype.toLocaleString, which goja lacks (its toLocaleString
// is toString, so toLocaleString('en-US') failed with a radix error).
// Machines format amounts for people (a total in a message, a currency
// in a summary) and must print what they print on Node. Other locales,
// and options whose output needs more of ICU's data (unit, compact and
// scientific notation, currency names), are refused with an error that
// says so, rather than formatted differently.

// currencyInfo is how en-US shows a currency.
type currencyInfo struct {
	symbol, narrow string
	digits         int
}

func currencyOf(code string) currencyInfo {
	if c, ok := enCurrencies[code]; ok {
		return c
	}
	return currencyInfo{code, code, 2}
}

// numberFormat is a resolved Intl.NumberFormat.
type numberFormat struct {
	style           string // decimal, percent, currency
	currency        string
	currencyDisplay string // symbol, narrowSymbol, code
	currencySign    string // standard, accounting
	minInt          int
	minFD, maxFD    int
	minSD, maxSD    int // 0 when fraction digits round
	grouping        string
	signDisplay     string
}

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
func newNumberFormat(vm *goja.Runtime, locales, options goja.Value) (*numberFormat, error) {
	if err := resolveLocale(locales); err != nil {
		return nil, err
	}
	f := &numberFormat{style: "decimal", currencyDisplay: "symbol", currencySign: "standard", minInt: 1, grouping: "auto", signDisplay: "auto"}
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
		f.style = style
	}
	if f.style == "unit" {
		return nil, rangeErr("style \"unit\" is not available here: stategate formats decimal, percent and currency styles only")
	}
	if v := get("currency"); v != nil {
		code := v.String()
		if len(code) != 3 || strings.IndexFunc(code, func(r rune) bool { return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') }) >= 0 {
			return nil, rangeErr("Invalid currency code : %s", code)
		}
		f.currency = strings.ToUpper(code)
	}
	if d, ok, err := str("currencyDisplay", "symbol", "narrowSymbol", "code", "name"); err != nil {
		return nil, err
	} else if ok {
		if d == "name" {
			return nil, rangeErr("currencyDisplay \"name\" is not available here: stategate shows a currency's symbol or code")
		}
		f.currencyDisplay = d
	}
	if s, ok, err := str("currencySign", "standard", "accounting"); err != nil {
		return nil, err
	} else if ok {
		f.currencySign = s
	}
	if f.style == "currency" && f.currency == "" {
		return nil, &intlError{"TypeError", "Currency code is required with currency style."}
	}
	if f.minInt, ok, err = digits("minimumIntegerDigits", 1, 21); err != nil {
		return nil, err
	} else if !ok {
		f.minInt = 1
	}
	// Fraction digits: the style's defaults, adjusted to those given.
	defMin, defMax := 0, 3
	switch f.style {
	case "percent":
		defMax = 0
	case "currency":
		d := currencyOf(f.currency).digits
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
		f.minSD, f.maxSD = minSD, maxSD
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
	f.minFD, f.maxFD = minFD, maxFD
	if v := get("useGrouping"); v != nil {
		if b, isBool := v.Export().(bool); isBool {
			f.grouping = "always"
			if !b {
				f.grouping = "false"
			}
		} else {
			switch s := v.String(); s {
			case "always", "auto", "min2":
				f.grouping = s
			case "true", "false":
				f.grouping = "auto"
			default:
				return nil, rangeErr("Value %s out of range for Intl.NumberFormat options property useGrouping", s)
			}
		}
	}
	if s, ok, err := str("signDisplay", "auto", "never", "always", "exceptZero", "negative"); err != nil {
		return nil, err
	} else if ok {
		f.signDisplay = s
	}
	return f, nil
}

// format formats x as ICU does for en-US.
func (f *numberFormat) format(x float64) string {
	neg, zero := math.Signbit(x), false
	var body string
	switch {
	case math.IsNaN(x):
		neg, body = false, "NaN"
	case math.IsInf(x, 0):
		body = "∞"
	default:
		digits, point := decimalDigits(math.Abs(x))
		if f.style == "percent" {
			point += 2
		}
		digits, point = f.round(digits, point)
		zero = digits == ""
		body = f.layout(digits, point)
	}
	sign := ""
	switch f.signDisplay {
	case "auto":
		if neg {
			sign = "-"
		}
	case "always":
		sign = "+"
		if neg {
			sign = "-"
		}
	case "exceptZero":
		if !zero && !math.IsNaN(x) {
			sign = "+"
			if neg {
				sign = "-"
			}
		}
	case "negative":
		if neg && !zero {
			sign = "-"
		}
	}
	switch f.style {
	case "percent":
		body += "%"
	case "currency":
		c := currencyOf(f.currency)
		sym := c.symbol
		switch f.currencyDisplay {
		case "narrowSymbol":
			sym = c.narrow
		case "code":
			sym = f.currency
		}
		// A symbol ending in a letter (a code, "F CFA") is set apart from
		// digits by a no-break space; "$" or "€" is not (nor NaN or ∞).
		if r, _ := utf8.DecodeLastRuneInString(sym); !unicode.IsSymbol(r) && body[0] >= '0' && body[0] <= '9' {
			sym += "\u00a0"
		}
		body = sym + body
		if f.currencySign == "accounting" && sign == "-" {
			return "(" + body + ")"
		}
	}
	return sign + body
}

// decimalDigits returns the shortest decimal digits of x (x >= 0) that
// read back as x, without leading or trailing zeros, and where the
// decimal point goes: x = 0.DIGITS × 10^point.
func decimalDigits(x float64) (string, int) {
	if x == 0 {
		return "", 1
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	return strings.TrimRight(digits, "0"), e + 1
}

// round rounds digits (0.DIGITS × 10^point) half away from zero, to the
// significant digits or else the fraction digits of f, and drops
// trailing zeros.
func (f *numberFormat) round(digits string, point int) (string, int) {
	keep := point + f.maxFD // digits kept
	if f.maxSD > 0 {
		keep = f.maxSD
	}
	if keep < 0 {
		return "", 1
	}
	if len(digits) > keep {
		up := digits[keep] >= '5'
		digits = digits[:keep]
		if up {
			b := []byte(digits)
			i := len(b) - 1
			for ; i >= 0 && b[i] == '9'; i-- {
				b[i] = '0'
			}
			if i < 0 {
				b = append([]byte{'1'}, b...)
				point++
			} else {
				b[i]++
			}
			digits = string(b)
		}
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return "", 1
	}
	return digits, point
}

// layout writes 0.DIGITS × 10^point with the integer and fraction digits
// f asks for, and its grouping.
func (f *numberFormat) layout(digits string, point int) string {
	var intPart, frac string
	switch {
	case point <= 0:
		intPart, frac = "", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		intPart = digits + strings.Repeat("0", point-len(digits))
	default:
		intPart, frac = digits[:point], digits[point:]
	}
	intPart = strings.TrimLeft(intPart, "0")
	if n := f.minInt - len(intPart); n > 0 {
		intPart = strings.Repeat("0", n) + intPart
	}
	if f.maxSD > 0 {
		// Significant digits: pad to the minimum, counting from the first
		// non-zero digit.
		sig := len(strings.TrimLeft(intPart, "0")) + len(frac)
		if strings.TrimLeft(intPart, "0") == "" {
			sig = len(strings.TrimLeft(frac, "0"))
			if digits == "" {
				sig = 1 // zero counts one significant digit
			}
		}
		if n := f.minSD - sig; n > 0 {
			frac += strings.Repeat("0", n)
		}
	} else if n := f.minFD - len(frac); n > 0 {
		frac += strings.Repeat("0", n)
	}
	grouped := intPart
	if g := f.grouping; g != "false" && !(g == "min2" && len(intPart) < 5) && len(intPart) > 3 {
		var b strings.Builder
		lead := len(intPart) % 3
		if lead > 0 {
			b.WriteString(intPart[:lead])
		}
		for i := lead; i < len(intPart); i += 3 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(intPart[i : i+3])
		}
		grouped = b.String()
	}
	if frac == "" {
		return grouped
	}
	return grouped + "." + frac
}

// resolved is resolvedOptions() of the format, as ICU orders it.
func (f *numberFormat) resolved(vm *goja.Runtime) *goja.Object {
	o := vm.NewObject()
	set := func(k string, v any) { _ = o.Set(k, v) }
	set("locale", "en-US")
	set("numberingSystem", "latn")
	set("style", f.style)
	if f.style == "currency" {
		set("currency", f.currency)
		set("currencyDisplay", f.currencyDisplay)
		set("currencySign", f.currencySign)
	}
	set("minimumIntegerDigits", f.minInt)
	set("minimumFractionDigits", f.minFD)
	set("maximumFractionDigits", f.maxFD)
	if f.maxSD > 0 {
		set("minimumSignificantDigits", f.minSD)
		set("maximumSignificantDigits", f.maxSD)
	}
	switch f.grouping {
	case "false":
		set("useGrouping", false)
	default:
		set("useGrouping", f.grouping)
	}
	set("notation", "standard")
	set("signDisplay", f.signDisplay)
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
		panic(vm.NewGoError(err))
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
			return vm.ToValue(f.format(toNumber(c.Argument(0))))
		})
		resolved := vm.ToValue(func(goja.FunctionCall) goja.Value { return f.resolved(vm) })
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
	intl := vm.NewObject()
	ctor := ctorV.ToObject(vm)
	_ = ctor.Set("supportedLocalesOf", func(c goja.FunctionCall) goja.Value {
		var out []any
		if err := resolveLocale(c.Argument(0)); err == nil && !goja.IsUndefined(c.Argument(0)) {
			out = append(out, "en-US")
		}
		return vm.ToValue(out)
	})
	if err := intl.Set("NumberFormat", ctor); err != nil {
		return err
	}
	if err := vm.Set("Intl", intl); err != nil {
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
		return vm.ToValue(f.format(this.ToFloat()))
	}), goja.FLAG_TRUE, goja.FLAG_FALSE, goja.FLAG_TRUE)
}

func isNumber(v goja.Value) bool {
	switch v.Export().(type) {
	case int64, float64:
		return true
	}
	return false
}
