package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// copyClone copies the clone in dir to a new directory and opens it with
// limits that always repack.
func copyClone(b *testing.B, url, dir string) *Source {
	b.Helper()
	to := filepath.Join(b.TempDir(), "clone.git")
	if err := os.CopyFS(to, os.DirFS(dir)); err != nil {
		b.Fatal(err)
	}
	return newSource(b, Config{URL: url, Path: ".", Dir: to, Logger: hclog.NewNullLogger(), GC: GCLimits{LooseObjects: -1}})
}

// BenchmarkFetchWhileHousekeeping is the fetch of a one-file push (what a
// webhook triggers) into the clone of BenchmarkHousekeepingAfterTwentyListPushes,
// alone (idle) and while a housekeeping run writes its pack (during):
// fetch-ms is the fetch, housekeep-ms the whole run it overlapped.
func BenchmarkFetchWhileHousekeeping(b *testing.B) {
	srv, url, work, _, prepared := twentyListPushes(b)
	srv.Commit(work, map[string]string{"policies/web/policy.toml": "default_action = \"allow\"\n"}, "a policy")
	srv.Push(work, "main")
	for _, during := range []bool{false, true} {
		name := "idle"
		if during {
			name = "during"
		}
		b.Run(name, func(b *testing.B) {
			var fetch, housekeep time.Duration
			for b.Loop() {
				b.StopTimer()
				c := copyClone(b, url, prepared)
				started, done := make(chan struct{}), make(chan time.Duration, 1)
				if during {
					c.packing = func() { close(started) }
					go func() {
						start := time.Now()
						if _, err := c.Housekeep(context.Background(), nil); err != nil {
							b.Error(err)
						}
						done <- time.Since(start)
					}()
					<-started
				}
				b.StartTimer()
				start := time.Now()
				mustFetch(b, c)
				fetch += time.Since(start)
				b.StopTimer()
				if during {
					housekeep += <-done
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(fetch.Milliseconds())/float64(b.N), "fetch-ms")
			b.ReportMetric(float64(housekeep.Milliseconds())/float64(b.N), "housekeep-ms")
		})
	}
}

// BenchmarkReadAfterHousekeeping reads the oldest and the newest of the
// 21 versions of the 1,000,000-entry list from the pack housekeeping
// wrote (window gcWindow: the oldest is at the end of the longest delta
// chain), each time through a new Source, so no blob cache helps.
func BenchmarkReadAfterHousekeeping(b *testing.B) {
	srv, url, work, _, prepared := twentyListPushes(b)
	c := copyClone(b, url, prepared)
	if h, err := c.Housekeep(context.Background(), nil); err != nil || !h.Ran {
		b.Fatalf("Housekeep = %+v, %v", h, err)
	}
	chain := maxChain(b, srv, c.cfg.Dir)
	oldest := srv.Git(work, "rev-list", "--max-parents=0", "HEAD")
	newest := srv.Git(work, "rev-parse", "HEAD")
	for _, bc := range []struct{ name, commit string }{{"oldest", oldest}, {"newest", newest}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				b.StopTimer()
				r := newSource(b, Config{URL: url, Path: ".", Dir: c.cfg.Dir, Logger: hclog.NewNullLogger()})
				runtime.GC()
				stop := sampleHeap(&peak)
				b.StartTimer()
				if _, err := r.Files(bc.commit); err != nil {
					b.Fatalf("Files(%s): %v", bc.commit, err)
				}
				stop()
			}
			b.ReportMetric(float64(chain), "max-chain")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// maxChain is the longest delta chain of the packs in the clone at dir,
// as `git verify-pack -v` counts them.
func maxChain(b *testing.B, srv *gittest.Server, dir string) int {
	idx, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.idx"))
	if err != nil || len(idx) == 0 {
		b.Fatalf("packs: %v %v", idx, err)
	}
	longest := 0
	for _, f := range idx {
		for _, line := range strings.Split(srv.Git(dir, "verify-pack", "-v", f), "\n") {
			var n, objs int
			if _, err := fmt.Sscanf(line, "chain length = %d: %d object", &n, &objs); err == nil {
				longest = max(longest, n)
			}
		}
	}
	return longest
}
