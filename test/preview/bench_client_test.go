package preview_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// rawConn is one keep-alive HTTP/1.1 connection that sends prepared
// requests and reads each answer's status and length without allocating:
// net/http's client costs the load generator several times what the node
// spends on a decision, and its queueing would show as node latency.
type rawConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// rawRequests are the wire form of POSTing each body to target.
func rawRequests(target string, bodies []string) ([][]byte, string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", err
	}
	out := make([][]byte, len(bodies))
	for i, b := range bodies {
		out[i] = fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\n\r\n%s", u.RequestURI(), u.Host, len(b), b)
	}
	return out, u.Host, nil
}

// dialRaw connects to addr; the connection is good for rawConnLife.
func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		err = c.SetDeadline(time.Now().Add(rawConnLife))
	}
	if err != nil {
		return nil, err
	}
	return &rawConn{conn: c, r: bufio.NewReaderSize(c, 4096)}, nil
}

// rawConnLife bounds one load run (each dials its own connections), so a
// node that stops answering fails the run instead of hanging it.
const rawConnLife = 2 * time.Minute

// sender is one worker's connection, dialled again after an error.
type sender struct {
	addr string
	rc   *rawConn
}

// send sends req and reports whether the answer was 200.
func (s *sender) send(req []byte) bool {
	if s.rc == nil {
		rc, err := dialRaw(s.addr)
		if err != nil {
			return false
		}
		s.rc = rc
	}
	code, err := s.rc.do(req)
	if err != nil {
		s.close()
		return false
	}
	return code == 200
}

func (s *sender) close() {
	if s.rc != nil {
		_ = s.rc.conn.Close()
		s.rc = nil
	}
}

// do sends req and reads the answer, returning its status code. The
// answer must have a Content-Length (the node's small JSON answers do).
func (rc *rawConn) do(req []byte) (int, error) {
	if _, err := rc.conn.Write(req); err != nil {
		return 0, err
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("status line %q: %v", line, err)
	}
	code, _ := atoiBytes(line[9:12])
	length := -1
	for {
		if line, err = rc.r.ReadSlice('\n'); err != nil {
			return 0, err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		if name, value, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(name, []byte("Content-Length")) {
			length, _ = atoiBytes(bytes.TrimSpace(value))
		}
	}
	if length < 0 {
		return 0, errors.New("answer without Content-Length")
	}
	_, err = rc.r.Discard(length)
	return code, err
}

// atoiBytes parses a non-negative decimal number.
func atoiBytes(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return -1, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(b) > 0
}
