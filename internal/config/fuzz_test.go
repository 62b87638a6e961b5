package config

import "testing"

// FuzzLoad feeds arbitrary bytes through the config parser: it must never
// panic, and whatever it accepts must validate again unchanged.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(contractExample))
	f.Add([]byte(""))
	f.Add([]byte("[node]\nidd = 1\n"))
	f.Add([]byte("[api]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\nmax_body_bytes = 10\n"))
	f.Add([]byte("[tls]\nca_file = \"ca.pem\"\ncert_file = \"n1.pem\"\nkey_file = \"n1-key.pem\"\n"))
	f.Add([]byte("[git]\nurl = \"git@h:o/r.git\"\n[[node]]\n"))
	f.Add([]byte(apiTrustExample))
	f.Add([]byte("[api]\ntls_cert_file = \"c\"\nclient_ca_file = \"ca\"\n[[api.tokens]]\nname = \"x\"\nrole = \"root\"\nenv = \"A\"\nfile = \"f\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "/base")
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		_ = c.API.TrustedPrefixes()
		// Not APICredentials: a fuzzed token file could be a FIFO.
		if _, err := c.CheckExposure(1); err != nil {
			t.Fatalf("exposure refused with credentials: %v", err)
		}
	})
}
