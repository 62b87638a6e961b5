package tlsconfig

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// ErrDenied is a certificate whose serial number is in the denylist.
var ErrDenied = errors.New("certificate is on the denylist")

// denylist is the serial numbers of certificates refused on the node port
// although they chain to the cluster CA: a compromised node's, between
// its removal and the rotation of the CA. Keys are lower-case hex without
// leading zeros (big.Int.Text(16)).
type denylist map[string]struct{}

// ParseDenylist reads a denylist file: one serial number a line, in hex as
// `openssl x509 -noout -serial` prints it (an optional "serial=" prefix,
// colons between the bytes allowed), or in decimal with a "dec:" prefix;
// blank lines and text after '#' are ignored. A line that is no serial
// number is an error, so that a typo does not leave a certificate working.
func ParseDenylist(b []byte) (map[string]struct{}, error) {
	out := denylist{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		serial, err := parseSerial(line)
		if err != nil {
			return nil, fmt.Errorf("denylist line %d: %w", n, err)
		}
		out[serial.Text(16)] = struct{}{}
	}
	return out, sc.Err()
}

func parseSerial(s string) (*big.Int, error) {
	v := new(big.Int)
	if dec, ok := strings.CutPrefix(s, "dec:"); ok {
		if _, ok := v.SetString(strings.TrimSpace(dec), 10); !ok {
			return nil, fmt.Errorf("%q is not a decimal serial number", s)
		}
		return v, nil
	}
	hex := strings.ReplaceAll(strings.TrimPrefix(strings.TrimPrefix(s, "serial="), "0x"), ":", "")
	if _, ok := v.SetString(hex, 16); !ok || v.Sign() < 0 {
		return nil, fmt.Errorf("%q is not a hex serial number", s)
	}
	return v, nil
}

// check refuses a chain holding a denied certificate (the leaf, or an
// intermediate the peer sent).
func (d denylist) check(certs []*x509.Certificate) error {
	for _, c := range certs {
		if _, ok := d[c.SerialNumber.Text(16)]; ok {
			return fmt.Errorf("%w: serial %s (subject %q)", ErrDenied, SerialHex(c), c.Subject.String())
		}
	}
	return nil
}

// SerialHex is a certificate's serial number as the denylist and openssl
// write it (upper-case hex, an even number of digits).
func SerialHex(c *x509.Certificate) string {
	s := strings.ToUpper(c.SerialNumber.Text(16))
	if len(s)%2 == 1 {
		s = "0" + s
	}
	return s
}

// loadDenylist reads and parses path.
func loadDenylist(path string) (denylist, error) {
	b, err := readBounded(path)
	if err != nil {
		return nil, err
	}
	d, err := ParseDenylist(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}
