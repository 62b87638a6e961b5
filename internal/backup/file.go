// Package backup is the snapshot file of `reconciler snapshot save`,
// `inspect` and `restore`: a raft snapshot of the replicated state, as the
// leader's FSM wrote it, between a header that says what it holds and a
// SHA-256 checksum of everything before it.
//
//	reconciler-snapshot 1\n
//	{header as one JSON line}\n
//	<Header.Size bytes: the raft snapshot>
//	sha256:<64 hex digits>\n
//
// The checksum comes last so the leader can stream a snapshot it never
// holds in memory. A reader therefore learns that a file is damaged only
// at its end: every consumer of Reader gets an error instead of io.EOF
// from a body that is short, long or altered, and restore checks the
// whole file before it writes anything.
package backup

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"
)

// FileFormat is the version of the file layout above.
const FileFormat = 1

// magic is the file's first line, with FileFormat.
const magic = "reconciler-snapshot"

// maxHeaderBytes bounds the header line a reader accepts.
const maxHeaderBytes = 64 << 10

// maxServers bounds the raft configuration a header may list.
const maxServers = 1024

// The errors a damaged or foreign file gives; each wraps ErrInvalid.
var (
	ErrInvalid   = errors.New("not a valid snapshot file")
	ErrTruncated = fmt.Errorf("%w: truncated", ErrInvalid)
	ErrChecksum  = fmt.Errorf("%w: checksum mismatch (the file was altered or damaged)", ErrInvalid)
)

// Server is a member of the raft configuration a snapshot was taken in.
type Server struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

// Header says what a snapshot file holds.
type Header struct {
	Format int `json:"format"`
	// Index and Term are the raft log position the snapshot covers.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// ActiveGeneration and Commit are the generation being served and
	// the git commit it was built from.
	ActiveGeneration uint64 `json:"activeGeneration"`
	Commit           string `json:"commit,omitempty"`
	// Generations, Experiments and Nodes count the state's records;
	// inspect checks them against the decoded state.
	Generations int `json:"generations"`
	Experiments int `json:"experiments"`
	Nodes       int `json:"nodes"`
	// NodeID is the leader that took it, Servers the raft configuration
	// of its cluster then.
	NodeID  string    `json:"nodeId"`
	Servers []Server  `json:"servers"`
	Time    time.Time `json:"time"`
	// Size is the length of the raft snapshot that follows.
	Size int64 `json:"size"`
}

func (h *Header) check() error {
	switch {
	case h.Format != FileFormat:
		return fmt.Errorf("%w: header format %d, this build reads %d", ErrInvalid, h.Format, FileFormat)
	case h.Size <= 0:
		return fmt.Errorf("%w: header says the snapshot is %d bytes", ErrInvalid, h.Size)
	case len(h.Servers) > maxServers:
		return fmt.Errorf("%w: header lists %d servers", ErrInvalid, len(h.Servers))
	case h.Generations < 0 || h.Experiments < 0 || h.Nodes < 0:
		return fmt.Errorf("%w: negative counts in the header", ErrInvalid)
	}
	return nil
}

// Write writes h and the h.Size bytes of body as a snapshot file. A body
// of another length is an error, and the file is then incomplete.
func Write(w io.Writer, h Header, body io.Reader) error {
	h.Format = FileFormat
	if err := h.check(); err != nil {
		return err
	}
	line, err := json.Marshal(h)
	if err != nil {
		return err
	}
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	if _, err := fmt.Fprintf(mw, "%s %d\n%s\n", magic, FileFormat, line); err != nil {
		return err
	}
	n, err := io.Copy(mw, io.LimitReader(body, h.Size+1))
	if err != nil {
		return fmt.Errorf("copy the snapshot: %w", err)
	}
	if n != h.Size {
		return fmt.Errorf("the snapshot is %d bytes, its metadata says %d", n, h.Size)
	}
	_, err = fmt.Fprintf(w, "sha256:%s\n", hex.EncodeToString(sum.Sum(nil)))
	return err
}

// Reader reads a snapshot file: its Header, then the snapshot itself
// through Read, which ends in io.EOF only once the checksum matched.
type Reader struct {
	Header Header
	br     *bufio.Reader
	sum    hash.Hash
	left   int64
	done   bool
	err    error // the outcome of the trailer, once read
}

// NewReader reads and checks the header of the file r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, maxHeaderBytes)
	sum := sha256.New()
	first, err := readLine(br, "first line")
	if err != nil {
		return nil, err
	}
	if string(first) != fmt.Sprintf("%s %d\n", magic, FileFormat) {
		return nil, fmt.Errorf("%w: it does not start with %q", ErrInvalid, magic)
	}
	line, err := readLine(br, "header")
	if err != nil {
		return nil, err
	}
	var h Header
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrInvalid, err)
	}
	if err := h.check(); err != nil {
		return nil, err
	}
	sum.Write(first)
	sum.Write(line)
	return &Reader{Header: h, br: br, sum: sum, left: h.Size}, nil
}

func readLine(br *bufio.Reader, what string) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: %s longer than %d bytes", ErrInvalid, what, maxHeaderBytes)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: %s", ErrTruncated, what)
	case err != nil:
		return nil, err
	}
	return bytes.Clone(line), nil
}

// Read reads the snapshot. It returns io.EOF after Header.Size bytes
// only when the checksum that follows them matches and nothing follows
// it; otherwise an error wrapping ErrInvalid.
func (r *Reader) Read(p []byte) (int, error) {
	if r.left == 0 {
		if err := r.finish(); err != nil {
			return 0, err
		}
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.sum.Write(p[:n])
	r.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if r.left > 0 {
			return n, fmt.Errorf("%w: the snapshot ends %d bytes early", ErrTruncated, r.left)
		}
		err = nil
	}
	return n, err
}

// finish reads and checks the trailer, once.
func (r *Reader) finish() error {
	if r.done {
		return r.err
	}
	r.done = true
	want := r.sum.Sum(nil)
	line, err := r.br.ReadSlice('\n')
	switch {
	case errors.Is(err, io.EOF):
		r.err = fmt.Errorf("%w: no checksum at the end", ErrTruncated)
	case err != nil:
		r.err = fmt.Errorf("%w: checksum line: %v", ErrInvalid, err)
	default:
		r.err = checkTrailer(line, want)
	}
	if r.err == nil {
		if _, err := r.br.ReadByte(); !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("%w: data after the checksum", ErrInvalid)
		}
	}
	return r.err
}

func checkTrailer(line, want []byte) error {
	hexSum, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("sha256:"))
	if !ok || len(hexSum) != 2*sha256.Size {
		return fmt.Errorf("%w: the checksum line is malformed", ErrInvalid)
	}
	// Compared as written (lower-case hex): any other spelling of the
	// same digest is an altered file too.
	if string(hexSum) != hex.EncodeToString(want) {
		return ErrChecksum
	}
	return nil
}

// Verify reads what is left of the snapshot and checks the checksum.
func (r *Reader) Verify() error {
	_, err := io.Copy(io.Discard, r)
	return err
}
