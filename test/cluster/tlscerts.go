package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"time"
)

// ParseCerts are the certificates of a PEM bundle (a CA bundle, a Secret's ca.crt), in its order; an error
// when a block is no certificate, or when there is none.
func ParseCerts(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate")
	}
	return certs, nil
}

// ServesCertOf is nil when the TLS server at addr (an operator's webhook or status server) shows a certificate
// for localhost that ca signed, and else why not: a test of the operator's certificates waits for it.
func ServesCertOf(addr string, ca *x509.Certificate) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}
