package reconcile

import (
	"errors"
	"fmt"
	"sync"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/policy"
)

// A branch or pull request is judged, previewed and committed as what it
// would make of main: the merge of its head into main's head, three-way
// from their merge base (gitsource.MergePolicies), the way GitHub computes
// refs/pull/N/merge. A branch left behind by newer commits of main then
// shows only its own change, never the reverse of main's.

// Trees reads, merges and validates the trees the leader judges: main's
// commits for the pass, and what each branch or pull request would make
// of main for its record, its experiments' previews and the GitHub
// worker. It caches the merged trees of sources, by main and head, and
// main's policies root, read once per head.
type Trees struct {
	cfg       *Config // the loop's
	mu        sync.Mutex
	trees     map[string]map[string][]byte
	conflicts map[string]string
	lastMain  struct {
		hash  string
		files map[string][]byte
	}
}

// merger is a Source that can merge (GitSource); without it (the loop's
// test fakes) a source is compared with main as it stands.
type merger interface {
	MergePolicies(main, source string) (*gitsource.Merge, error)
}

// sourceChange is what a source's head would do to main.
type sourceChange struct {
	// changed names the policies whose merged content differs from main's.
	changed []string
	// files is the merged policies root; nil with problems or a conflict.
	files map[string][]byte
	// problems are the reasons the merged tree cannot be read.
	problems []string
	// conflict, when set, says which files both changed since the base.
	conflict string
}

// changeOf computes sourceChange for head against main.
func (t *Trees) changeOf(main, head gitsource.Revision) (sourceChange, error) {
	m, ok := t.cfg.Source.(merger)
	if !ok {
		return t.changeAgainstHead(main, head)
	}
	merge, err := m.MergePolicies(main.Hash, head.Hash)
	switch {
	case errors.Is(err, gitsource.ErrTooLarge):
		return sourceChange{problems: []string{err.Error()}, changed: []string{}}, nil
	case err != nil:
		return sourceChange{}, fmt.Errorf("merging %s into %s: %w", head, main, err)
	case len(merge.Conflicts) > 0:
		changed, err := t.cfg.Source.ChangedPolicies(merge.Base, head.Hash)
		if err != nil && !errors.Is(err, gitsource.ErrTooLarge) {
			return sourceChange{}, fmt.Errorf("comparing %s with its merge base: %w", head, err)
		}
		msg := (&gitsource.ConflictError{Source: head.Hash, Main: main.Hash, Paths: merge.Conflicts}).Error()
		return sourceChange{changed: nonNilStrings(changed), problems: []string{msg}, conflict: msg}, nil
	}
	mainFiles, err := t.mainFiles(main)
	if err != nil {
		return sourceChange{}, err
	}
	changed, err := gitsource.ChangedPoliciesFS(gitsource.FilesFS(mainFiles), gitsource.FilesFS(merge.Files), t.cfg.LoadOptions)
	if err != nil {
		return sourceChange{}, fmt.Errorf("comparing %s with %s: %w", head, main, err)
	}
	return sourceChange{changed: nonNilStrings(changed), files: merge.Files}, nil
}

// changeAgainstHead is changeOf for a source that cannot merge: the head's
// own tree, compared with main's head.
func (t *Trees) changeAgainstHead(main, head gitsource.Revision) (sourceChange, error) {
	changed, err := t.cfg.Source.ChangedPolicies(main.Hash, head.Hash)
	if err != nil && !errors.Is(err, gitsource.ErrTooLarge) {
		return sourceChange{}, fmt.Errorf("comparing %s with %s: %w", head, main, err)
	}
	files, problems, err := t.read(head)
	if err != nil {
		return sourceChange{}, err
	}
	return sourceChange{changed: nonNilStrings(changed), files: files, problems: problems}, nil
}

// judge validates the merged tree: the problems of a source, as a
// BranchValidation, and the etags of its policies when valid.
func (t *Trees) judge(c sourceChange) (BranchValidation, Validation) {
	problems := c.problems
	var v Validation
	if problems == nil {
		v = t.validate(c.files)
		problems = v.Problems
	}
	return BranchValidation{Valid: len(problems) == 0, Errors: capProblems(problems)}, v
}

// SourceFiles is the policies root a source previews: the merge of head
// into main (cached by both), or, on a conflict, the head's own tree with
// the conflict's message.
func (t *Trees) SourceFiles(main, head string) (map[string][]byte, string, error) {
	key := main + ".." + head
	t.mu.Lock()
	f, ok := t.trees[key]
	conflict := t.conflicts[key]
	t.mu.Unlock()
	if ok {
		return f, conflict, nil
	}
	c, err := t.changeOf(gitsource.Revision{Ref: t.cfg.Branch, Hash: main}, gitsource.Revision{Ref: "source", Hash: head})
	if err != nil {
		return nil, "", err
	}
	files := c.files
	if c.conflict != "" {
		var problems []string
		if files, problems, err = t.read(gitsource.Revision{Ref: "source", Hash: head}); err != nil {
			return nil, "", err
		}
		if problems != nil {
			files = nil
		}
	}
	if files == nil {
		files = map[string][]byte{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.trees) > 4*maxBranches {
		clear(t.trees)
		clear(t.conflicts)
	}
	t.trees[key] = files
	if c.conflict != "" {
		t.conflicts[key] = c.conflict
	}
	return files, c.conflict, nil
}

// mainFiles reads main's policies root (empty when it cannot be read),
// keeping the last one: every branch of a pass is compared with the same
// main, which must not be read (up to gitsource.MaxFilesSize) per branch.
func (t *Trees) mainFiles(main gitsource.Revision) (map[string][]byte, error) {
	t.mu.Lock()
	if t.lastMain.hash == main.Hash && t.lastMain.files != nil {
		defer t.mu.Unlock()
		return t.lastMain.files, nil
	}
	t.mu.Unlock()
	files, problems, err := t.read(main)
	if err != nil {
		return nil, err
	}
	if problems != nil {
		files = map[string][]byte{}
	}
	t.mu.Lock()
	t.lastMain.hash, t.lastMain.files = main.Hash, files
	t.mu.Unlock()
	return files, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// changedMatches are the match expressions of the rules c adds or changes
// in its changed policies: a rule of the same name and match in main's
// version is unchanged. A policy that does not load at the source has no
// experiment (nothing of it is previewed); one that does not load on main
// has every rule changed. Nothing without a merged tree (a conflict).
func (t *Trees) changedMatches(c sourceChange, main gitsource.Revision) []string {
	if c.files == nil || len(c.changed) == 0 {
		return nil
	}
	mainFiles, err := t.mainFiles(main)
	if err != nil {
		mainFiles = map[string][]byte{}
	}
	var out []string
	for _, name := range c.changed {
		p, err := policy.LoadPolicy(gitsource.FilesFS(c.files), name, t.cfg.LoadOptions)
		if err != nil {
			continue
		}
		live := map[string]string{}
		if lp, err := policy.LoadPolicy(gitsource.FilesFS(mainFiles), name, t.cfg.LoadOptions); err == nil {
			for _, r := range lp.Rules {
				live[r.Name] = r.Match
			}
		}
		for _, r := range p.Rules {
			if m, ok := live[r.Name]; !ok || m != r.Match {
				out = append(out, r.Match)
			}
		}
	}
	return out
}
