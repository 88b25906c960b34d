// Writes xstate/js/testdata/intl/numbers.json: numbers formatted by Node's
// Intl.NumberFormat('en-US', options), the golden file of TestNumberFormat.
//   node scripts/gen-intl-cases.mjs > xstate/js/testdata/intl/numbers.json
const values = [0, -0, 1, -1, 0.5, -0.5, 1.5, 2.5, 0.125, 1.005, 2.675, 1234.5, -1234.5, 1234.5678, 999.9995,
  999999.5, 0.0001, -0.0001, 1e-7, 123456789.123456789, 1e21, 1.5e300, 0.256, 0.2567, 99.99, 12, 1234, 12345, 0.1 + 0.2,
  NaN, Infinity, -Infinity, 42.195, 1000000, 5e-324, 9007199254740993, 0.045, 1.45, 3.14159265];
const options = [
  undefined, {}, { maximumFractionDigits: 0 }, { maximumFractionDigits: 2 }, { minimumFractionDigits: 2 },
  { minimumFractionDigits: 2, maximumFractionDigits: 2 }, { minimumFractionDigits: 5 }, { maximumFractionDigits: 10 },
  { minimumIntegerDigits: 3 }, { maximumSignificantDigits: 3 }, { minimumSignificantDigits: 4 },
  { minimumSignificantDigits: 2, maximumSignificantDigits: 5 }, { maximumSignificantDigits: 1 },
  { useGrouping: false }, { useGrouping: true }, { useGrouping: 'min2' }, { useGrouping: 'always' }, { useGrouping: 'auto' },
  { signDisplay: 'always' }, { signDisplay: 'exceptZero' }, { signDisplay: 'never' }, { signDisplay: 'negative' },
  { style: 'percent' }, { style: 'percent', maximumFractionDigits: 1 }, { style: 'percent', minimumFractionDigits: 2 },
  { style: 'currency', currency: 'USD' }, { style: 'currency', currency: 'usd' }, { style: 'currency', currency: 'EUR' },
  { style: 'currency', currency: 'JPY' }, { style: 'currency', currency: 'BHD' }, { style: 'currency', currency: 'CHF' },
  { style: 'currency', currency: 'XOF' }, { style: 'currency', currency: 'CAD' }, { style: 'currency', currency: 'CAD', currencyDisplay: 'narrowSymbol' },
  { style: 'currency', currency: 'USD', currencyDisplay: 'code' }, { style: 'currency', currency: 'USD', currencySign: 'accounting' },
  { style: 'currency', currency: 'USD', signDisplay: 'always' }, { style: 'currency', currency: 'USD', maximumFractionDigits: 0 },
  { style: 'currency', currency: 'USD', minimumFractionDigits: 0 }, { style: 'currency', currency: 'ABC' },
  { style: 'currency', currency: 'USD', signDisplay: 'exceptZero', currencySign: 'accounting' },
  // errors
  { style: 'currency' }, { currency: 'US' }, { maximumFractionDigits: 101 }, { minimumFractionDigits: 3, maximumFractionDigits: 1 },
  { style: 'bogus' }, { minimumSignificantDigits: 5, maximumSignificantDigits: 2 }, { minimumIntegerDigits: 0 },
];
const cases = [];
for (const o of options) {
  for (const x of values) {
    const c = { x: Object.is(x, -0) ? '-0' : Number.isFinite(x) ? x : String(x), options: o ?? null };
    try {
      c.out = new Intl.NumberFormat('en-US', o).format(x);
    } catch (e) {
      c.error = e.constructor.name;
    }
    cases.push(c);
    if (c.error) break; // an options error does not depend on the value
  }
}
const locales = [undefined, 'en', 'en-US', 'EN-us', ['en-US', 'de-DE'], []];
for (const l of locales) cases.push({ x: 1234.5, locales: l ?? null, options: null, out: (1234.5).toLocaleString(l) });
console.log(JSON.stringify({ node: process.version, icu: process.versions.icu, cases }, null, 1));
