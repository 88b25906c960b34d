package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// A keySource holds the issuer's keys.
type keySource interface {
	// lookup returns the keys that may have signed a token of a key id
	// and an algorithm, and the generation of the keys (which changes
	// when they do): ErrUnknownKey when there are none, the context's
	// error when it ends while a fetch is awaited.
	lookup(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, uint64, error)
	// generation is the keys' generation now.
	generation() uint64
}

// fileKeys are the keys of a JWKS file. The file is looked at again at
// most every second (at once for a key it does not have): when it changed
// (its size, time or identity), it is read again; a file that no longer
// reads, or holds no key, leaves the keys as they were (and is said in
// the log, once for each change).
type fileKeys struct {
	path string
	now  func() time.Time
	log  *slog.Logger

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	gen     uint64
	info    os.FileInfo // of the file as last read (or found unreadable)
	checked time.Time
}

func (f *fileKeys) start() error {
	info, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("auth: JWKS file: %w", err)
	}
	keys, err := f.read(info)
	if err != nil {
		return err
	}
	f.keys, f.info, f.gen, f.checked = keys, info, 1, f.now()
	f.log.Info("auth: the issuer's keys", "file", f.path, "keys", len(keys))
	return nil
}

// read reads the file's keys, logging those left out.
func (f *fileKeys) read(info os.FileInfo) ([]jose.JSONWebKey, error) {
	if info.Size() > maxJWKS {
		return nil, fmt.Errorf("auth: JWKS file %s: %d bytes (at most %d)", f.path, info.Size(), maxJWKS)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS file: %w", err)
	}
	keys, skipped, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS file %s: %w", f.path, err)
	}
	for _, s := range skipped {
		f.log.Warn("auth: a key of the JWKS is not used", "file", f.path, "key", s)
	}
	return keys, nil
}

// refresh reads the file again if it changed since it was last looked at
// (force: whenever it was; else at most every fileRecheck). Under f.mu.
func (f *fileKeys) refresh(force bool) {
	now := f.now()
	if !force && now.Sub(f.checked) < fileRecheck {
		return
	}
	f.checked = now
	info, err := os.Stat(f.path)
	if err != nil {
		if f.info != nil {
			f.log.Error("auth: the JWKS file cannot be read; the keys read before are kept", "file", f.path, "err", err)
			f.info = nil
		}
		return
	}
	if f.info != nil && os.SameFile(info, f.info) && info.Size() == f.info.Size() && info.ModTime().Equal(f.info.ModTime()) {
		return
	}
	f.info = info
	keys, err := f.read(info)
	if err != nil {
		f.log.Error("auth: the JWKS file changed and does not read; the keys read before are kept", "err", err)
		return
	}
	f.keys = keys
	f.gen++
	f.log.Info("auth: the issuer's keys read again", "file", f.path, "keys", len(keys))
}

func (f *fileKeys) lookup(_ context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh(false)
	keys := matching(f.keys, kid, alg)
	if len(keys) == 0 {
		f.refresh(true)
		keys = matching(f.keys, kid, alg)
	}
	if len(keys) == 0 {
		return nil, f.gen, refuse(ErrUnknownKey, fmt.Errorf("kid %q, alg %s", kid, alg))
	}
	return keys, f.gen, nil
}

func (f *fileKeys) generation() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refresh(false)
	return f.gen
}

// remoteKeys are the keys of a JWKS URL: fetched at start, kept for as
// long as the answer's Cache-Control max-age says (an hour when it says
// nothing, at most a day, at least minRefetch), then fetched again in the
// background while the keys kept go on serving. A token naming a key not
// kept has the URL fetched again at once (and waits for it), unless a
// fetch was tried less than minRefetch ago. A failed fetch keeps the keys
// as they were.
type remoteKeys struct {
	url        string
	client     *http.Client
	minRefetch time.Duration
	now        func() time.Time
	log        *slog.Logger

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	gen     uint64
	expires time.Time // when the keys kept are stale
	tried   time.Time // when the last fetch began
	// fetching is closed when the fetch under way ends; nil when none is.
	fetching chan struct{}
}

func (r *remoteKeys) start(ctx context.Context) error {
	r.tried = r.now()
	keys, maxAge, err := r.fetch(ctx)
	if err != nil {
		return fmt.Errorf("auth: JWKS URL %s: %w", r.url, err)
	}
	r.keys, r.gen, r.expires = keys, 1, r.now().Add(maxAge)
	r.log.Info("auth: the issuer's keys", "url", r.url, "keys", len(keys), "kept", maxAge)
	return nil
}

// fetch fetches the URL: its keys, and how long they may be kept.
func (r *remoteKeys) fetch(ctx context.Context) ([]jose.JSONWebKey, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	res, err := r.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("%s", res.Status)
	}
	if ct := res.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || !(mt == "application/json" || mt == "application/jwk-set+json") {
			return nil, 0, fmt.Errorf("Content-Type %s (a JWKS is application/json or application/jwk-set+json)", ct)
		}
	}
	data, err := io.ReadAll(io.LimitReader(res.Body, maxJWKS+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > maxJWKS {
		return nil, 0, fmt.Errorf("the answer has more than %d bytes", maxJWKS)
	}
	keys, skipped, err := parseJWKS(data)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range skipped {
		r.log.Warn("auth: a key of the JWKS is not used", "url", r.url, "key", s)
	}
	return keys, maxAge(res.Header.Get("Cache-Control"), r.minRefetch), nil
}

// maxAge is how long an answer with a Cache-Control header may be kept:
// its max-age (no-cache and no-store: none), within [least, maxMaxAge];
// defaultMaxAge when it says nothing.
func maxAge(cc string, least time.Duration) time.Duration {
	age, said := defaultMaxAge, false
	for _, d := range strings.Split(cc, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
		switch strings.ToLower(name) {
		case "no-cache", "no-store":
			return least
		case "max-age":
			if n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && n >= 0 && !said {
				age, said = time.Duration(min(n, int64(maxMaxAge/time.Second)))*time.Second, true
			}
		}
	}
	return min(max(age, least), maxMaxAge)
}

// refetch starts a fetch in the background unless one is under way, and
// returns the channel closed when it ends. Under r.mu.
func (r *remoteKeys) refetch() chan struct{} {
	if r.fetching != nil {
		return r.fetching
	}
	done := make(chan struct{})
	r.fetching, r.tried = done, r.now()
	go func() {
		defer close(done)
		// Not the request's context: a fetch serves every request
		// waiting for it, and ends within fetchTimeout.
		keys, age, err := r.fetch(context.Background())
		r.mu.Lock()
		defer r.mu.Unlock()
		r.fetching = nil
		if err != nil {
			r.log.Warn("auth: the JWKS URL failed; the keys kept go on serving", "url", r.url, "keys", len(r.keys), "err", err)
			return
		}
		r.keys, r.expires = keys, r.now().Add(age)
		r.gen++
	}()
	return done
}

// mayFetch reports whether a fetch may begin now. Under r.mu.
func (r *remoteKeys) mayFetch() bool { return r.now().Sub(r.tried) >= r.minRefetch }

func (r *remoteKeys) lookup(ctx context.Context, kid string, alg jose.SignatureAlgorithm) ([]jose.JSONWebKey, uint64, error) {
	waited := false
	for {
		r.mu.Lock()
		keys, gen := matching(r.keys, kid, alg), r.gen
		if r.now().After(r.expires) && r.mayFetch() {
			r.refetch() // stale: the keys kept serve meanwhile
		}
		if len(keys) > 0 {
			r.mu.Unlock()
			return keys, gen, nil
		}
		var wait chan struct{}
		switch {
		case r.fetching != nil && !waited:
			wait = r.fetching
		case r.mayFetch() && !waited:
			wait = r.refetch()
		}
		r.mu.Unlock()
		if wait == nil {
			return nil, gen, refuse(ErrUnknownKey, fmt.Errorf("kid %q, alg %s", kid, alg))
		}
		select {
		case <-wait:
			waited = true
		case <-ctx.Done():
			return nil, gen, ctx.Err()
		}
	}
}

func (r *remoteKeys) generation() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().After(r.expires) && r.mayFetch() {
		r.refetch()
	}
	return r.gen
}
