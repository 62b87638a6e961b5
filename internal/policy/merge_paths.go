package policy

import (
	"fmt"
	"io/fs"
	"path"
)

// MergePaths is MergeFiles for files in a file system: each file's include
// list is followed, and the included files are merged just before the file
// that includes them, as Load does for policy.toml. This is what lets
// `reconciler merge edge-firewall/policy.toml edge-firewall/baseline.toml`
// work on a real policy directory. Paths are slash-separated and relative to
// fsys; includes must stay inside fsys. A file included twice is merged once.
func MergePaths(fsys fs.FS, paths []string, opts LoadOptions) (*Policy, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("policy: no files to merge")
	}
	var sink errorSink
	var order []*parsedFile
	seen := map[string]bool{}
	var first *parsedFile
	budget := &loadBudget{}
	for _, name := range paths {
		name = path.Clean(name)
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			sink.add(name, 0, "", "%s", readError(err))
			continue
		}
		pf, errs := budget.decode(name, data, kindMergeTree)
		sink.addAll(errs)
		if first == nil {
			first = pf
		}
		included, errs := readIncludes(fsys, path.Dir(name), pf, budget)
		sink.addAll(errs)
		for _, f := range append(included, pf) {
			if !seen[f.name] {
				seen[f.name] = true
				order = append(order, f)
			}
		}
	}
	if first == nil {
		return nil, sink.errs
	}
	c := newComposer(opts.MergeDefault, first.merge)
	for _, f := range order {
		c.merge(f)
	}
	p := c.finish(mergedName(paths[0]), path.Clean(paths[0]))
	sink.addAll(c.errs)
	if len(sink.errs) > 0 {
		return nil, sink.errs
	}
	return p, nil
}
