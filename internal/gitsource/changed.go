package gitsource

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"testing/fstest"

	"github.com/policyrollout/reconciler/internal/policy"
)

// ChangedPolicies names, sorted, the policies that differ between two
// commits: added, removed, or with another merged content. fromHash "" means
// "nothing before" (every policy of toHash is added); a commit without the
// policies root has no policies. See ChangedPoliciesFS for what "differ"
// means.
func (s *Source) ChangedPolicies(fromHash, toHash string) ([]string, error) {
	from, err := s.fsOrEmpty(fromHash)
	if err != nil {
		return nil, err
	}
	to, err := s.fsOrEmpty(toHash)
	if err != nil {
		return nil, err
	}
	return ChangedPoliciesFS(from, to, s.cfg.LoadOptions)
}

// fsOrEmpty is FS, with no commit or no policies root read as empty.
func (s *Source) fsOrEmpty(hash string) (fs.FS, error) {
	if hash == "" {
		return fstest.MapFS{}, nil
	}
	fsys, err := s.FS(hash)
	if errors.Is(err, fs.ErrNotExist) {
		return fstest.MapFS{}, nil
	}
	return fsys, err
}

// ChangedPoliciesFS compares two policies roots by loading both with
// policy.Load and comparing each policy's etag, rather than diffing files:
// the etag already covers everything a policy includes (a changed
// _shared/ fragment changes exactly the policies that include it, even
// from another policy's directory), and edits no decision can see
// (comments, layout, key order) change nothing, as for generations and
// experiments. A policy that fails to load has no etag; it counts as
// changed when its own files, the files of the "_" and "." directories,
// or its errors differ.
func ChangedPoliciesFS(from, to fs.FS, opts policy.LoadOptions) ([]string, error) {
	a, err := fingerprints(from, opts)
	if err != nil {
		return nil, err
	}
	b, err := fingerprints(to, opts)
	if err != nil {
		return nil, err
	}
	var changed []string
	for name, fp := range a {
		if b[name] != fp {
			changed = append(changed, name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			changed = append(changed, name)
		}
	}
	sort.Strings(changed)
	return changed, nil
}

// fingerprints maps each policy of a root to what identifies its content.
func fingerprints(fsys fs.FS, opts policy.LoadOptions) (map[string]string, error) {
	repo, err := policy.Load(fsys, opts)
	if repo == nil {
		return nil, err // an unreadable root, not a policy problem
	}
	fp := make(map[string]string, len(repo.Policies)+len(repo.Invalid))
	for _, p := range repo.Policies {
		fp[p.Name] = "etag:" + p.Etag()
	}
	if len(repo.Invalid) == 0 {
		return fp, nil
	}
	shared, err := sharedDirs(fsys)
	if err != nil {
		return nil, err
	}
	for name, errs := range repo.Invalid {
		sum, err := digestFiles(fsys, append([]string{name}, shared...), errs.Error())
		if err != nil {
			return nil, err
		}
		fp[name] = "invalid:" + sum
	}
	return fp, nil
}

// sharedDirs lists the top-level directories that are never policies.
func sharedDirs(fsys fs.FS) ([]string, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && (strings.HasPrefix(e.Name(), "_") || strings.HasPrefix(e.Name(), ".")) {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs, nil
}

// digestFiles hashes the paths and contents of every file under dirs, and
// extra.
func digestFiles(fsys fs.FS, dirs []string, extra string) (string, error) {
	h := sha256.New()
	for _, dir := range dirs {
		err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(data)) // lengths keep the encoding unambiguous
			h.Write(data)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	h.Write([]byte(extra))
	return hex.EncodeToString(h.Sum(nil)), nil
}
