package gitsource

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
	"github.com/policyrollout/reconciler/internal/listgen"
)

// exampleFiles reads policies.example, a realistic policies root.
func exampleFiles(b *testing.B) map[string]string {
	b.Helper()
	root := filepath.Join("..", "..", "policies.example")
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return files
}

// BenchmarkFetchUnchanged is the cost of one poll when nothing moved: the
// ref listing, the comparison with the clone, and reading the refs back.
// The loopback server runs in this process, so its net/http and CGI
// plumbing (not git-http-backend itself, a child process) is counted too;
// requests/op shows the round trips.
func BenchmarkFetchUnchanged(b *testing.B) {
	srv := gittest.NewServer(b, gittest.Options{Token: testToken})
	url := srv.InitRepo("policies", exampleFiles(b))
	for _, bc := range []struct{ name, url string }{
		{"http", url},
		{"local-path", srv.RepoPath("policies")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newSource(b, Config{URL: bc.url, Token: testToken, Path: ".", Logger: hclog.NewNullLogger()})
			mustFetch(b, s)
			start := srv.Requests()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Fetch(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			if bc.name == "http" {
				b.ReportMetric(float64(srv.Requests()-start)/float64(b.N), "requests/op")
			}
		})
	}
}

// BenchmarkFiles is the cost of reading a policies root for the raft log.
func BenchmarkFiles(b *testing.B) {
	srv := gittest.NewServer(b, gittest.Options{})
	srv.InitRepo("policies", exampleFiles(b))
	s := newSource(b, Config{URL: srv.RepoPath("policies"), Path: ".", Logger: hclog.NewNullLogger()})
	head := mustFetch(b, s).Main.Hash
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Files(head); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFetchOneLineListChange is the fetch of a commit that adds one
// line to a 1,000,000-entry list (16 MB) over HTTP: the first phase of
// push→Active for a list change (docs/performance.md).
func BenchmarkFetchOneLineListChange(b *testing.B) {
	srv := gittest.NewServer(b, gittest.Options{Token: testToken})
	var list strings.Builder
	list.WriteString(listgen.Dense{Seed: 23}.Text(1_000_000)) // random, as real lists are: a regular one deflates far faster
	url := srv.InitRepo("policies", map[string]string{"_lists/blocklist.netset": list.String()})
	work := srv.Clone(url)
	s := newSource(b, Config{URL: url, Token: testToken, Path: ".", Logger: hclog.NewNullLogger()})
	mustFetch(b, s)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		list.WriteString(fmt.Sprintf("198.51.100.%d/32\n", i%250))
		srv.Commit(work, map[string]string{"_lists/blocklist.netset": list.String()}, "one more")
		srv.Push(work, "main")
		b.StartTimer()
		if _, err := s.Fetch(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
