package main

import (
	"strings"
	"testing"
)

// TestStoreFlagErrors: a --store that does not parse, or names a database
// that cannot be reached, is one line that says so, and never shows the
// password it holds; a bad --route is refused before anything opens.
func TestStoreFlagErrors(t *testing.T) {
	socket := t.TempDir() // no server there
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"state", "list", "--store", "postgres://app:s3cret@db:port/gate"}, "--store: the PostgreSQL connection string does not parse"},
		{[]string{"state", "list", "--store", "postgres://app:s3cret@/gate?host=" + socket}, "--store: cannot connect to PostgreSQL (postgres user=app host=socket " + socket + " port=5432 database=gate)"},
		{[]string{"graph", "../../machines/invoice.json", "--handle", "h", "--store", "host=" + socket + " password=s3cret dbname=gate"}, "--store: cannot connect to PostgreSQL"},
		{[]string{"serve", "--machines", "../../machines", "--store", "postgres://app:s3cret@/gate?host=" + socket, "--route", "a.b"}, "--route: the route name \"a.b\" has '.'"},
		{[]string{"serve", "--machines", "../../machines", "--memory", "--store", "postgres://app:s3cret@/gate?host=" + socket}, "--memory and --store cannot be combined"},
	} {
		stdout, stderr, code := runMain(t, c.args...)
		if code != 1 || stdout != "" || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "s3cret") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.args, code, stdout, stderr, c.want)
		}
	}
}
