package auth_test

import (
	"context"
	"fmt"
	"testing"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/stategate/stategate/auth"
	"github.com/stategate/stategate/auth/authtest"
)

// BenchmarkAuthenticate: a token seen before (a session's requests) and a
// new token each time (verified: its signature checked), RS256 and ES256.
func BenchmarkAuthenticate(b *testing.B) {
	iss := authtest.NewIssuer(b, issuerURL)
	v, err := auth.New(context.Background(), auth.Options{Issuer: issuerURL, Audience: audience, JWKS: iss.WriteJWKS(b, b.TempDir()), Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	for _, alg := range []jose.SignatureAlgorithm{jose.RS256, jose.ES256} {
		b.Run(string(alg)+"/seen", func(b *testing.B) {
			tok := iss.Token(b, alg, iss.Claims("alice", audience))
			for b.Loop() {
				if _, _, err := v.Authenticate(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(alg)+"/new", func(b *testing.B) {
			toks := make([]string, 512)
			for i := range toks {
				toks[i] = iss.Token(b, alg, with(iss.Claims(fmt.Sprint("user-", i), audience), "jti", fmt.Sprint(b.N, "-", i)))
			}
			i := 0
			for b.Loop() {
				// More tokens than the cache keeps would be slow to make:
				// a fresh verifier's cache is empty.
				if i%len(toks) == 0 {
					b.StopTimer()
					v, _ = auth.New(context.Background(), auth.Options{Issuer: issuerURL, Audience: audience, JWKS: iss.WriteJWKS(b, b.TempDir()), Logger: quiet()})
					b.StartTimer()
				}
				if _, _, err := v.Authenticate(context.Background(), toks[i%len(toks)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
