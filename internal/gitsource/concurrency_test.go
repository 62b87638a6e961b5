package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/policy"
)

// TestReadsDuringFetches runs readers of an old commit while fetches bring
// new objects in; with -race it checks the storage locking.
func TestReadsDuringFetches(t *testing.T) {
	srv, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	old := mustFetch(t, s).Main.Hash
	work := srv.Clone(url)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := readCommitEveryWay(s, old); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < 5; i++ {
		srv.Commit(work, map[string]string{"policies/beta/n.toml": fmt.Sprintf("# %d\n", i)}, "step")
		srv.Push(work, "main")
		if _, err := s.Fetch(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// readCommitEveryWay reads a commit the three ways callers do.
func readCommitEveryWay(s *Source, hash string) error {
	if _, err := s.Files(hash); err != nil {
		return err
	}
	fsys, err := s.FS(hash)
	if err != nil {
		return err
	}
	if _, err := policy.Load(fsys, policy.LoadOptions{}); err != nil {
		return err
	}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			_, err = d.Info()
		}
		return err
	})
	if err != nil {
		return err
	}
	changed, err := s.ChangedPolicies(hash, hash)
	if err == nil && len(changed) != 0 {
		err = errors.New("a commit differs from itself")
	}
	return err
}

// TestOneFSFromManyGoroutines shares one fs.FS, as a parallel compile
// would; with -race it checks that lookups (which go-git caches in the
// tree) are serialised.
func TestOneFSFromManyGoroutines(t *testing.T) {
	_, url := newRepo(t, gittest.Options{})
	s := newSource(t, Config{URL: url})
	fsys, err := s.FS(mustFetch(t, s).Main.Hash)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range []string{"alpha/tests/t.toml", "_shared/office.toml", "gamma/policy.toml", "alpha/policy.toml"} {
				if _, err := fs.ReadFile(fsys, p); err != nil {
					t.Error(err)
				}
				if _, err := fs.Stat(fsys, p); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}
