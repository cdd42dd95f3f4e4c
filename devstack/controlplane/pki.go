package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki names the files of the control plane's certificates and keys.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string       { return p.path("ca.crt") }
func (p pki) servingCert() string  { return p.path("apiserver.crt") }
func (p pki) servingKey() string   { return p.path("apiserver.key") }
func (p pki) adminCert() string    { return p.path("admin.crt") }
func (p pki) adminKey() string     { return p.path("admin.key") }
func (p pki) saPublicKey() string  { return p.path("sa.pub") }
func (p pki) saPrivateKey() string { return p.path("sa.key") }
func (p pki) complete() bool {
	for _, f := range []string{p.caCert(), p.path("ca.key"), p.servingCert(), p.servingKey(), p.adminCert(), p.adminKey(), p.saPublicKey(), p.saPrivateKey()} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	return true
}

// ensurePKI creates a CA, the API server's serving certificate for 127.0.0.1 and
// localhost, an admin client certificate (group system:masters) and the
// service-account signing key pair, unless a complete set already exists.
func ensurePKI(dir string) (pki, error) {
	p := pki{dir: dir}
	if p.complete() {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	caTemplate := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "dbi-dev-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return p, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return p, err
	}
	if err := writeCert(p.caCert(), caDER); err != nil {
		return p, err
	}
	if err := writeKey(p.path("ca.key"), caKey); err != nil {
		return p, err
	}

	serving := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := issue(ca, caKey, serving, p.servingCert(), p.servingKey()); err != nil {
		return p, err
	}
	admin := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "dbi-dev-admin", Organization: []string{"system:masters"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := issue(ca, caKey, admin, p.adminCert(), p.adminKey()); err != nil {
		return p, err
	}

	// Service-account tokens are signed with RSA, which every verifier accepts.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	if err := writeKey(p.saPrivateKey(), saKey); err != nil {
		return p, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	return p, os.WriteFile(p.saPublicKey(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

func issue(ca *x509.Certificate, caKey crypto.Signer, template *x509.Certificate, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("while signing %s: %w", template.Subject.CommonName, err)
	}
	if err := writeCert(certFile, der); err != nil {
		return err
	}
	return writeKey(keyFile, key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}

func writeCert(path string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

func writeKey(path string, key any) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeKubeconfig writes an admin kubeconfig that embeds the certificates, so it
// can be copied elsewhere and still work.
func writeKubeconfig(path, server string, p pki) error {
	read := func(f string) ([]byte, error) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if len(b) == 0 {
			return nil, errors.New(f + " is empty")
		}
		return b, nil
	}
	ca, err := read(p.caCert())
	if err != nil {
		return err
	}
	cert, err := read(p.adminCert())
	if err != nil {
		return err
	}
	key, err := read(p.adminKey())
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["dbi-dev"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["dbi-dev-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["dbi-dev"] = &clientcmdapi.Context{Cluster: "dbi-dev", AuthInfo: "dbi-dev-admin", Namespace: "default"}
	cfg.CurrentContext = "dbi-dev"
	return clientcmd.WriteToFile(*cfg, path)
}
