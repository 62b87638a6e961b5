package gitsource

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
)

// BenchmarkHousekeepingAfterTwentyListPushes is one housekeeping run on a
// clone that fetched 20 one-line pushes of a 1,000,000-entry list (each
// run starts from a copy of it, all loose). bytes-before/after are the
// objects directory, peak-heap-MB the heap's high-water mark during the
// run in this process and child-peak-rss-MB the repack child's, by pack
// window and where the pack is written; after-a-repack is a later run, on
// a clone housekept once then pushed to three more times.
func BenchmarkHousekeepingAfterTwentyListPushes(b *testing.B) {
	srv, url, work, list, prepared := twentyListPushes(b)
	// again is the same clone housekept once, then three more pushes:
	// what each later run has to do.
	again := filepath.Join(b.TempDir(), "clone.git")
	if err := os.CopyFS(again, os.DirFS(prepared)); err != nil {
		b.Fatal(err)
	}
	a := newSource(b, Config{URL: url, Path: ".", Dir: again, Logger: hclog.NewNullLogger()})
	a.gc = gcLimits{looseObjects: -1, window: gcWindow}
	if _, err := a.Housekeep(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	for i := range 3 {
		list += fmt.Sprintf("198.51.100.%d/32\n", i)
		srv.Commit(work, map[string]string{"_lists/blocklist.netset": list}, "one more")
		srv.Push(work, "main")
		mustFetch(b, a)
	}
	for _, bc := range []struct {
		name   string
		dir    string
		window uint
		child  bool
		limit  uint64 // the child's memory limit; 0 is the default
	}{
		{"window=10/in-process", prepared, 10, false, 0},
		{fmt.Sprintf("window=%d/in-process", gcWindow), prepared, gcWindow, false, 0},
		{fmt.Sprintf("window=%d/child", gcWindow), prepared, gcWindow, true, 0},
		{fmt.Sprintf("window=%d/child-256MiB", gcWindow), prepared, gcWindow, true, 256 << 20},
		{fmt.Sprintf("window=%d/child-384MiB", gcWindow), prepared, gcWindow, true, 384 << 20},
		{"after-a-repack/child", again, gcWindow, true, 0},
	} {
		prepared, window, child, limit := bc.dir, bc.window, bc.child, bc.limit
		b.Run(bc.name, func(b *testing.B) {
			var before, after ObjectStats
			var peak uint64
			var childRSS int64
			for b.Loop() {
				b.StopTimer()
				dir := filepath.Join(b.TempDir(), "clone.git")
				if err := os.CopyFS(dir, os.DirFS(prepared)); err != nil {
					b.Fatal(err)
				}
				c := newSource(b, Config{URL: url, Path: ".", Dir: dir, Logger: hclog.NewNullLogger()})
				c.gc = gcLimits{looseObjects: -1, window: window}
				c.cfg.Repack.MemoryLimit = limit
				if !child {
					c.cfg.Repack = RepackChild{}
				}
				runtime.GC()
				stop := sampleHeap(&peak)
				b.StartTimer()
				h, err := c.Housekeep(context.Background(), nil)
				b.StopTimer()
				stop()
				if err != nil || !h.Ran {
					b.Fatalf("Housekeep = %+v, %v", h, err)
				}
				before, after, childRSS = h.Before, h.After, max(childRSS, h.ChildPeakRSS)
				b.StartTimer()
			}
			b.ReportMetric(float64(before.Bytes()), "bytes-before")
			b.ReportMetric(float64(after.Bytes()), "bytes-after")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
			b.ReportMetric(float64(childRSS)/(1<<20), "child-peak-rss-MB")
		})
	}
}

// twentyListPushes is a clone that fetched 20 one-line pushes of a
// 1,000,000-entry list, all loose, in prepared; work is a user's clone
// of the remote at url, and list the last version.
func twentyListPushes(b *testing.B) (srv *gittest.Server, url, work, list, prepared string) {
	srv = gittest.NewServer(b, gittest.Options{})
	list = listgen.Dense{Seed: 23, V6Every: 4}.Text(1_000_000) // as test/lists' (poorly compressible)
	url = srv.InitRepo("policies", map[string]string{"_lists/blocklist.netset": list})
	work = srv.Clone(url)
	prepared = filepath.Join(b.TempDir(), "clone.git")
	s := newSource(b, Config{URL: url, Path: ".", Dir: prepared, Logger: hclog.NewNullLogger()})
	mustFetch(b, s)
	for i := range 20 {
		list += fmt.Sprintf("192.0.2.%d/32\n", i)
		srv.Commit(work, map[string]string{"_lists/blocklist.netset": list}, "one more")
		srv.Push(work, "main")
		mustFetch(b, s)
	}
	return srv, url, work, list, prepared
}

// sampleHeap keeps the largest live heap seen into peak until stopped.
func sampleHeap(peak *uint64) (stop func()) {
	var done atomic.Bool
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for !done.Load() {
			metrics.Read(sample)
			*peak = max(*peak, sample[0].Value.Uint64())
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() { done.Store(true); <-finished }
}
