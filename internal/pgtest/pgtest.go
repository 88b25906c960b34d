// Package pgtest starts throwaway PostgreSQL clusters for tests: initdb
// in a temporary folder (as the postgres user when the tests run as root:
// initdb and postgres refuse root), the server listening on a unix socket
// in that folder only (no TCP: listen_addresses empty), stopped and started again at
// will (for tests of a database that goes away), and a fresh database per
// test, dropped when the test ends. A test binary shares one cluster
// (Shared), started on first use; tests skip, saying why, where
// PostgreSQL is not installed, unless STATEGATE_REQUIRE_POSTGRES is set
// (CI sets it: there a missing PostgreSQL is a failure). It knows
// nothing of stategate's stores: it hands out connection URLs.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the environment variable that turns a skip for want of
// PostgreSQL into a failure.
const RequireEnv = "STATEGATE_REQUIRE_POSTGRES"

// BinEnv names the environment variable that names the folder of
// PostgreSQL's programs (initdb, postgres), when they are not where Find
// looks.
const BinEnv = "STATEGATE_PG_BIN"

// User is the cluster's superuser, the user of the URLs handed out.
const User = "stategate"

// ErrNotInstalled is returned by Find and Start where PostgreSQL's
// programs cannot be found or cannot be run.
var ErrNotInstalled = errors.New("PostgreSQL is not installed")

// Find returns the folder of PostgreSQL's programs: $STATEGATE_PG_BIN,
// else the newest of Debian's /usr/lib/postgresql/*/bin, else the folder
// of initdb in PATH.
func Find() (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err != nil {
			return "", fmt.Errorf("%w: %s=%s has no initdb", ErrNotInstalled, BinEnv, dir)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w: no initdb in /usr/lib/postgresql/*/bin or PATH (apt-get install postgresql, or set %s)", ErrNotInstalled, BinEnv)
}

// version is the major version in a path like /usr/lib/postgresql/15/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Options configure a cluster.
type Options struct {
	// NoFsync runs the server with fsync=off (faster; a crash of the
	// machine loses what it held, a crash of the server does not).
	NoFsync bool
	// Settings are more server settings (name: value).
	Settings map[string]string
}

// Cluster is a throwaway PostgreSQL cluster.
type Cluster struct {
	dir  string // the cluster's folder: data/, the socket, log
	bin  string
	cred *syscall.Credential // whom the programs run as (nil: this process's user)
	args []string            // the server's settings, as -c flags

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{} // closed when proc exits
}

// Start makes a cluster in a new temporary folder and starts it. Stop it
// with Close, which removes the folder.
func Start(o Options) (*Cluster, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root, and there is no postgres user to run initdb as (initdb refuses root)", ErrNotInstalled)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if c.dir, err = os.MkdirTemp("", "stategate-pg-"); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			c.removeDir()
			return nil, err
		}
	}
	init := exec.Command(filepath.Join(bin, "initdb"), "-D", c.data(), "-A", "trust", "-U", User,
		"--no-sync", "-E", "UTF8", "--no-locale", "--no-instructions")
	init.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	if out, err := init.CombinedOutput(); err != nil {
		c.removeDir()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": c.dir,
		"port":                    "5432",
		"max_connections":         "200",
		"shared_buffers":          "32MB",
		"fsync":                   "on",
		"log_min_messages":        "warning",
		"logging_collector":       "off",
	}
	if o.NoFsync {
		settings["fsync"], settings["synchronous_commit"], settings["full_page_writes"] = "off", "off", "off"
	}
	for k, v := range o.Settings {
		settings[k] = v
	}
	names := make([]string, 0, len(settings))
	for k := range settings {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		c.args = append(c.args, "-c", k+"="+settings[k])
	}
	if err := c.Start(); err != nil {
		c.removeDir()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) logPath() string { return filepath.Join(c.dir, "log") }

// Dir is the folder of the cluster's socket (a URL's host).
func (c *Cluster) Dir() string { return c.dir }

// URL is the connection URL of a database of the cluster, as its
// superuser, through its socket.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=5432&sslmode=disable", User, database, c.dir)
}

// Start starts the server (again, after Stop or Kill), returning once it
// accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("pgtest: the server is running")
	}
	logf, err := os.OpenFile(c.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), append([]string{"-D", c.data()}, c.args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server goes when this process does, however it ends: its
	// parent-death signal asks for a fast shutdown. The signal follows
	// the thread that started it, which stays until the server exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGINT}
	started, done := make(chan error, 1), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	c.proc, c.done = cmd, done
	if err := c.awaitReady(done); err != nil {
		cmd.Process.Signal(syscall.SIGQUIT)
		<-done
		c.proc = nil
		return err
	}
	return nil
}

// awaitReady waits until the server's postmaster.pid says it is ready
// (as pg_ctl -w waits), or the server exits.
func (c *Cluster) awaitReady(done chan struct{}) error {
	deadline := time.Now().Add(2 * time.Minute)
	pidFile := filepath.Join(c.data(), "postmaster.pid")
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("postgres exited as it started:\n%s", c.logTail())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not get ready in 2 minutes:\n%s", c.logTail())
		}
	}
}

// logTail is the end of the server's log.
func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// Stop stops the server with a fast shutdown (its connections are ended,
// what was committed is kept).
func (c *Cluster) Stop() error { return c.stop(syscall.SIGINT) }

// Kill stops the server with an immediate shutdown (as a crash would:
// the next start recovers from the log).
func (c *Cluster) Kill() error { return c.stop(syscall.SIGQUIT) }

func (c *Cluster) stop(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return nil
	}
	if err := c.proc.Process.Signal(sig); err != nil {
		return err
	}
	<-c.done
	c.proc = nil
	return nil
}

// Close stops the server and removes the cluster's folder.
func (c *Cluster) Close() error {
	err := c.Stop()
	c.removeDir()
	return err
}

func (c *Cluster) removeDir() { os.RemoveAll(c.dir) }

// Exec runs SQL as the superuser in the database postgres.
func (c *Cluster) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// NewDatabase creates a database for one test and returns its URL; it is
// dropped when the test ends (its connections ended first).
func (c *Cluster) NewDatabase(t testing.TB) string {
	t.Helper()
	name := "t_" + strings.ToLower(rand.Text()[:12])
	ctx := context.Background()
	if err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			c.mu.Lock()
			running := c.proc != nil
			c.mu.Unlock()
			if running {
				t.Errorf("pgtest: drop database %s: %v", name, err)
			}
		}
	})
	return c.URL(name)
}

// Shared is a cluster shared by a test binary's tests, started by the
// first test that asks for it. Its zero value is ready; the binary's
// TestMain closes it once the tests ran:
//
//	var pg pgtest.Shared
//
//	func TestMain(m *testing.M) { code := m.Run(); pg.Close(); os.Exit(code) }
type Shared struct {
	// Options configure the cluster.
	Options Options

	once sync.Once
	c    *Cluster
	err  error
}

// Cluster returns the shared cluster, started on first use. A test
// skips where PostgreSQL is not installed (fails under
// STATEGATE_REQUIRE_POSTGRES), and fails where it would not start.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	s.once.Do(func() { s.c, s.err = Start(s.Options) })
	switch {
	case errors.Is(s.err, ErrNotInstalled) && os.Getenv(RequireEnv) == "":
		t.Skipf("pgtest: %v", s.err)
	case s.err != nil:
		t.Fatalf("pgtest: %v", s.err)
	}
	return s.c
}

// Close stops the shared cluster, if it was started, and removes it.
func (s *Shared) Close() {
	if s.c != nil {
		s.c.Close()
	}
}
