package raftstore

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The snapshot is written piece by piece rather than by json.Encoder,
// which marshals the whole document into one buffer before writing it: a
// state holding a 16 MB list (a 21 MB snapshot) cost 64 MB of transient
// heap at its peak, the encoded state and the buffer's doublings, on every
// node at every snapshot (BenchmarkWriteSnapshotList). Here the transient memory is one record (a generation
// without its files, a node, a document) and a 64 KiB write buffer; file
// and chunk contents are base64-encoded straight into the writer.
//
// The bytes are exactly those json.Encoder wrote (older nodes and
// existing backups read them, and the summary must stay in front): the
// document's fixed shape is written here and every record is left to
// json.Marshal, whose output is what the encoder embeds. What this file
// must reproduce of encoding/json: map keys sorted by their text (so
// generation 10 comes before 2), integer keys quoted, nil maps and byte
// slices as null, omitempty maps left out when empty, []byte as padded
// standard base64, and a newline at the end. snapwrite_test.go compares
// the two for generated states of every shape.

// snapshotBufferBytes is the write buffer: large enough that the many
// small pieces reach the sink (a file) in few writes.
const snapshotBufferBytes = 64 << 10

// snapWriter writes JSON pieces to a buffered writer. Write errors are
// sticky in bufio.Writer and reported by Flush.
type snapWriter struct {
	w *bufio.Writer
}

// writeSnapshotStream writes the snapshotFile of s.
func writeSnapshotStream(w io.Writer, s *State) error {
	view, format := snapshotView(s)
	sw := snapWriter{w: bufio.NewWriterSize(w, snapshotBufferBytes)}
	sw.raw(`{"format":`)
	sw.raw(strconv.Itoa(format))
	sw.raw(`,"summary":`)
	if err := sw.value(Summarize(s)); err != nil {
		return err
	}
	sw.raw(`,"state":`)
	if err := sw.state(view); err != nil {
		return err
	}
	sw.raw("}\n")
	// The writer's error, as it was: Persist and the callers name the step.
	return sw.w.Flush()
}

// state writes s's fields in State's order (TestSnapshotWriterKnowsEveryField
// holds the list a new field must join).
func (sw snapWriter) state(s *State) error {
	sw.raw(`{"generations":`)
	if err := writeMap(sw, s.Generations, sw.generation); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    uint64
	}{{"active", s.Active}, {"previous", s.Previous}, {"staged", s.Staged}, {"highest", s.Highest}} {
		sw.raw(`,"` + f.name + `":`)
		sw.raw(strconv.FormatUint(f.v, 10))
	}
	tables := []struct {
		name      string
		omitEmpty bool
		write     func() error
	}{
		{"nodes", false, func() error { return writeMap(sw, s.Nodes, valueOf[Node](sw)) }},
		{"experiments", false, func() error { return writeMap(sw, s.Experiments, valueOf[Experiment](sw)) }},
		{"operations", false, func() error { return writeMap(sw, s.Operations, valueOf[Operation](sw)) }},
		{"dismissed", len(s.Dismissed) == 0, func() error { return writeMap(sw, s.Dismissed, valueOf[Dismissal](sw)) }},
		{"sources", false, func() error { return writeMap(sw, s.Sources, valueOf[SourceStatus](sw)) }},
		{"branches", false, func() error { return writeMap(sw, s.Branches, valueOf[BranchRecord](sw)) }},
		{"pulls", false, func() error { return writeMap(sw, s.Pulls, valueOf[PullRecord](sw)) }},
		{"claims", false, func() error { return writeMap(sw, s.Claims, valueOf[CommandClaim](sw)) }},
		{"chunks", len(s.Chunks) == 0, func() error { return writeMap(sw, s.Chunks, sw.chunk) }},
	}
	for _, t := range tables {
		if t.omitEmpty {
			continue
		}
		sw.raw(`,"` + t.name + `":`)
		if err := t.write(); err != nil {
			return err
		}
	}
	sw.raw(`,"lastIndex":`)
	sw.raw(strconv.FormatUint(s.LastIndex, 10))
	sw.raw("}")
	return nil
}

// generation writes g with its files streamed: they are most of a
// generation of the formats without chunks (up to MaxGenerationBytes).
func (sw snapWriter) generation(g Generation) error {
	files := g.Files
	g.Files = nil
	return sw.spliced(g, `"files":null`, files != nil, func() error {
		return writeMap(sw, files, func(b []byte) error { sw.bytes(b); return nil })
	})
}

// chunk writes c with its data streamed.
func (sw snapWriter) chunk(c Chunk) error {
	data := c.Data
	c.Data = nil
	return sw.spliced(c, `"data":null`, data != nil, func() error { sw.bytes(data); return nil })
}

// spliced writes v, marshalled with one field nil, with that field's
// marker (`"name":null`) replaced by what write writes, unless the field
// was nil. The marker's first occurrence is the field: every field before
// it is a number, a string or a map of strings, and a JSON string holds
// no unescaped quote, so no earlier text can read `"name":null`.
func (sw snapWriter) spliced(v any, marker string, splice bool, write func() error) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	i := bytes.Index(b, []byte(marker))
	if !splice || i < 0 {
		if splice {
			return fmt.Errorf("encode snapshot: %T has no %s", v, marker)
		}
		_, _ = sw.w.Write(b)
		return nil
	}
	colon := i + bytes.IndexByte(b[i:], ':')
	_, _ = sw.w.Write(b[:colon+1])
	if err := write(); err != nil {
		return err
	}
	_, _ = sw.w.Write(b[i+len(marker):])
	return nil
}

// bytes writes b as encoding/json does: null for nil, else standard
// base64 in quotes, encoded into the buffer without a copy of its own.
func (sw snapWriter) bytes(b []byte) {
	if b == nil {
		sw.raw("null")
		return
	}
	_ = sw.w.WriteByte('"')
	enc := base64.NewEncoder(base64.StdEncoding, sw.w)
	_, _ = enc.Write(b)
	_ = enc.Close()
	_ = sw.w.WriteByte('"')
}

func (sw snapWriter) raw(s string) { _, _ = sw.w.WriteString(s) }

// value writes v marshalled on its own: a record small enough to hold.
func (sw snapWriter) value(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	_, _ = sw.w.Write(b)
	return nil
}

// valueOf adapts value to writeMap's typed callback.
func valueOf[V any](sw snapWriter) func(V) error {
	return func(v V) error { return sw.value(v) }
}

// mapKey is a map key type of State: encoding/json writes an integer key
// as its decimal text in quotes and sorts every map by the key's text.
type mapKey interface {
	string | int | int64 | uint64
}

// writeMap writes m as encoding/json does, each value by write.
func writeMap[K mapKey, V any](sw snapWriter, m map[K]V, write func(V) error) error {
	if m == nil {
		sw.raw("null")
		return nil
	}
	type entry struct {
		text string
		key  K
	}
	keys := make([]entry, 0, len(m))
	for k := range m {
		keys = append(keys, entry{keyText(k), k})
	}
	slices.SortFunc(keys, func(a, b entry) int { return strings.Compare(a.text, b.text) })
	sw.raw("{")
	for i, e := range keys {
		if i > 0 {
			sw.raw(",")
		}
		if err := sw.value(e.text); err != nil {
			return err
		}
		sw.raw(":")
		if err := write(m[e.key]); err != nil {
			return err
		}
	}
	sw.raw("}")
	return nil
}

func keyText[K mapKey](k K) string {
	switch k := any(k).(type) {
	case string:
		return k
	case int:
		return strconv.Itoa(k)
	case int64:
		return strconv.FormatInt(k, 10)
	case uint64:
		return strconv.FormatUint(k, 10)
	}
	panic(fmt.Sprintf("snapshot: map key %T", k))
}
