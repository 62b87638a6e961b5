package preview

import (
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// SeriesMinutes is how many minutes of per-minute counts an experiment
// version keeps: the last hour, what a reviewer looks at before merging.
const SeriesMinutes = 60

// seriesStep is the width of one point of a Series, in seconds.
const seriesStep = 60

// Series is the live-mirrored traffic of one experiment version minute by
// minute: point i counts the evaluations of the minute starting at
// Start + i·StepSeconds. It covers at most the last SeriesMinutes minutes
// up to the minute the stats were taken in, from the first of them with
// traffic; every slice has the same length. Replayed traffic is not in
// it: it happened before the experiment started.
type Series struct {
	Start       time.Time `json:"start"`
	StepSeconds int       `json:"stepSeconds"`
	Evaluated   []uint64  `json:"evaluated"`
	Changed     []uint64  `json:"changed"`
	AllowToDeny []uint64  `json:"allowToDeny"`
	DenyToAllow []uint64  `json:"denyToAllow"`
}

// minuteBucket counts one minute of live traffic; minute is in Unix
// minutes, 0 for a bucket never used.
type minuteBucket struct {
	minute                                       int64
	evaluated, changed, allowToDeny, denyToAllow uint64
}

// minutes is a ring of the last SeriesMinutes buckets, slot minute mod
// SeriesMinutes: a fixed 2.4 KB per experiment version, however long it
// runs and however much traffic it sees.
type minutes [SeriesMinutes]minuteBucket

func unixMinute(t time.Time) int64 { return t.Unix() / seriesStep }

// add counts one live evaluation made at at. A request older than the
// bucket now in its slot (a clock stepped back) is left out of the series.
func (m *minutes) add(at time.Time, live, exp engine.Decision) {
	mi := unixMinute(at)
	if mi <= 0 {
		return
	}
	b := &m[mi%SeriesMinutes]
	switch {
	case b.minute > mi:
		return
	case b.minute < mi:
		*b = minuteBucket{minute: mi}
	}
	b.evaluated++
	if live.Verdict == exp.Verdict && live.Rule == exp.Rule {
		return
	}
	b.changed++
	switch {
	case live.Verdict == engine.Allow && exp.Verdict == engine.Deny:
		b.allowToDeny++
	case live.Verdict == engine.Deny && exp.Verdict == engine.Allow:
		b.denyToAllow++
	}
}

// series renders the hour up to now's minute; nil when it had no traffic
// (or now is zero: stats with no clock, like an offline replay's).
func (m *minutes) series(now time.Time) *Series {
	if now.IsZero() {
		return nil
	}
	var acc seriesAcc
	for i := range m {
		if b := m[i]; b.minute != 0 && b.evaluated > 0 {
			acc.addBucket(b)
		}
	}
	return acc.result(unixMinute(now))
}

// seriesAcc adds series up by minute (across nodes, for Merge).
type seriesAcc struct {
	byMinute map[int64]minuteBucket
	last     int64 // the newest minute any input reached
}

func (a *seriesAcc) addBucket(b minuteBucket) {
	if a.byMinute == nil {
		a.byMinute = map[int64]minuteBucket{}
	}
	s := a.byMinute[b.minute]
	s.minute = b.minute
	s.evaluated += b.evaluated
	s.changed += b.changed
	s.allowToDeny += b.allowToDeny
	s.denyToAllow += b.denyToAllow
	a.byMinute[b.minute] = s
}

// add adds one node's series. One that is not what this build sends
// (another step, slices of other lengths, longer than the hour, a start
// no sane clock gives) is left out rather than trusted: it comes over the
// network.
func (a *seriesAcc) add(s *Series) {
	n := len(s.Evaluated)
	if s.StepSeconds != seriesStep || n == 0 || n > SeriesMinutes ||
		len(s.Changed) != n || len(s.AllowToDeny) != n || len(s.DenyToAllow) != n {
		return
	}
	if y := s.Start.Year(); y < 2000 || y > 9000 {
		return // a clock this far off would move everyone's hour; past 9999 it would not encode
	}
	first := unixMinute(s.Start)
	for i := range n {
		a.addBucket(minuteBucket{minute: first + int64(i), evaluated: s.Evaluated[i], changed: s.Changed[i],
			allowToDeny: s.AllowToDeny[i], denyToAllow: s.DenyToAllow[i]})
	}
	a.last = max(a.last, first+int64(n-1))
}

// result renders the hour up to minute end (the newest minute seen when
// end is 0), from its first minute with traffic; nil when it had none.
func (a *seriesAcc) result(end int64) *Series {
	if end == 0 {
		end = a.last
	}
	first := int64(0)
	for mi, b := range a.byMinute {
		if mi > end-SeriesMinutes && mi <= end && b.evaluated > 0 && (first == 0 || mi < first) {
			first = mi
		}
	}
	if first == 0 {
		return nil
	}
	n := int(end - first + 1)
	s := &Series{Start: time.Unix(first*seriesStep, 0).UTC(), StepSeconds: seriesStep,
		Evaluated: make([]uint64, n), Changed: make([]uint64, n), AllowToDeny: make([]uint64, n), DenyToAllow: make([]uint64, n)}
	for i := range n {
		b := a.byMinute[first+int64(i)]
		s.Evaluated[i], s.Changed[i], s.AllowToDeny[i], s.DenyToAllow[i] = b.evaluated, b.changed, b.allowToDeny, b.denyToAllow
	}
	return s
}
