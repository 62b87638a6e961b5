package engine

import (
	"weak"

	"github.com/policyrollout/reconciler/internal/policy"
)

// A validation that outlives one tree (the leader's sandbox worker) sees
// each list again with every commit, and usually unchanged or changed by
// a line. Compiling it afresh to measure it (measureLists) cost 1 to 2.5 s
// of a one-line change's push→Active for a 1,000,000-entry list, so the
// cache remembers what each list it measured holds, and a list it already
// holds, or derives from one it measured, is not measured again.

// maxMeasured bounds the measures kept; past it those of lists no longer
// held are dropped, and when it is still full, all are (a list forgotten
// is measured again).
const maxMeasured = 256

// remeasure returns l compiled and its compiled bytes without compiling
// it whole: the list shared already, or derived from a measured earlier
// content of its file (deriveList), whose bytes per entry it is taken to
// have (a derived list shares all but the paths to its new entries). ok
// is false when neither holds; the caller then compiles and measures l.
func (c *listCache) remeasure(l *policy.List) (cl *compiledList, bytes int64, ok bool) {
	c.mu.Lock()
	cl = c.m[listKey(l)].Value()
	bytes, ok = c.measured[weak.Make(cl)]
	c.mu.Unlock()
	if cl != nil && ok {
		return cl, bytes, true
	}
	for _, base := range c.recent.Get(fileKey(l)) {
		c.mu.Lock()
		b, measured := c.measured[weak.Make(base)]
		c.mu.Unlock()
		if !measured || base.entries == 0 {
			continue
		}
		if d := deriveList(base, l); d != nil {
			d = c.put(l, d)
			bytes = b * int64(l.Entries) / int64(base.entries)
			c.noteMeasured(d, bytes)
			return d, bytes, true
		}
	}
	return nil, 0, false
}

// noteMeasured remembers that cl holds bytes.
func (c *listCache) noteMeasured(cl *compiledList, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.measured == nil || len(c.measured) >= maxMeasured {
		for k := range c.measured {
			if k.Value() == nil {
				delete(c.measured, k)
			}
		}
	}
	if c.measured == nil || len(c.measured) >= maxMeasured {
		c.measured = map[weak.Pointer[compiledList]]int64{}
	}
	c.measured[weak.Make(cl)] = bytes
}
