package upstream

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchDebounce is how long Watch waits after a change to the file before
// it reads it: editors write a file in several steps.
const watchDebounce = 100 * time.Millisecond

// Watch applies the upstreams file again whenever it changes, until ctx
// ends. It watches the file's folder, since editors replace a file rather
// than write it. A file that does not load is logged, and the servers
// stay as they are.
func (m *Manager) Watch(ctx context.Context, file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("watch %s: %w", file, err)
	}
	fire := make(chan struct{}, 1)
	timer := time.AfterFunc(time.Hour, func() {
		select {
		case fire <- struct{}{}:
		default:
		}
	})
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			m.log.Warn("watching the upstreams file", "file", file, "err", err)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if filepath.Clean(ev.Name) == abs {
				timer.Reset(watchDebounce)
			}
		case <-fire:
			c, err := Load(file)
			if err != nil {
				m.log.Error("upstreams file not applied; the servers stay as they were", "file", file, "err", err)
				continue
			}
			m.log.Info("upstreams file changed", "file", file)
			m.Apply(ctx, c)
		}
	}
}
