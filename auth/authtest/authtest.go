// Package authtest is an issuer of tokens for tests: keys made in the
// test (RSA 2048 and ECDSA P-256), their JWKS, and JWTs signed with them
// (go-jose), good or made wrong on purpose. It knows nothing of the
// servers that take them.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// The key ids of an Issuer's keys.
const (
	RSAKeyID = "rsa-1"
	ECKeyID  = "ec-1"
)

// An Issuer signs tokens with its keys.
type Issuer struct {
	// URL is its iss.
	URL string
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey
}

// NewIssuer makes an issuer of the URL given, with fresh keys.
func NewIssuer(t testing.TB, url string) *Issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &Issuer{URL: url, RSA: rk, EC: ek}
}

// JWKS is the JWKS of the issuer's public keys.
func (i *Issuer) JWKS(t testing.TB) []byte {
	t.Helper()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &i.RSA.PublicKey, KeyID: RSAKeyID, Algorithm: string(jose.RS256), Use: "sig"},
		{Key: &i.EC.PublicKey, KeyID: ECKeyID, Algorithm: string(jose.ES256), Use: "sig"},
	}}
	data, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// WriteJWKS writes the JWKS into a file of dir and returns its path.
func (i *Issuer) WriteJWKS(t testing.TB, dir string) string {
	t.Helper()
	file := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(file, i.JWKS(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Claims are a good token's claims for an audience: iss, sub, aud, iat
// now, exp in an hour.
func (i *Issuer) Claims(sub, aud string) map[string]any {
	now := time.Now()
	return map[string]any{"iss": i.URL, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// Token signs claims with the issuer's key for alg (RS256 or ES256), its
// key id in the header.
func (i *Issuer) Token(t testing.TB, alg jose.SignatureAlgorithm, claims map[string]any) string {
	t.Helper()
	switch alg {
	case jose.RS256:
		return Sign(t, alg, jose.JSONWebKey{Key: i.RSA, KeyID: RSAKeyID}, claims)
	case jose.ES256:
		return Sign(t, alg, jose.JSONWebKey{Key: i.EC, KeyID: ECKeyID}, claims)
	}
	t.Fatalf("authtest: the issuer signs RS256 or ES256, not %s", alg)
	return ""
}

// Sign signs claims with any key and algorithm go-jose has.
func Sign(t testing.TB, alg jose.SignatureAlgorithm, key any, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Unsigned is a token of the algorithm "none": a header, the claims and no
// signature.
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}
