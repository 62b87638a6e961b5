package gitsource

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/gittest"
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
