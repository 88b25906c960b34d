package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Describe names the database a connection string (a pgx URL,
// postgres://… or postgresql://…, or a key=value string) connects to, for
// logs and messages: its user, host, port and database, never its
// password. A string that does not parse is an error that does not quote
// it (it may hold a password).
func Describe(conn string) (string, error) {
	cfg, err := pgconn.ParseConfig(conn)
	if err != nil {
		msg := "the PostgreSQL connection string does not parse"
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && pe.Unwrap() != nil {
			msg += fmt.Sprintf(" (%v)", pe.Unwrap())
		}
		return "", errors.New(msg + ": give a URL (postgres://USER@HOST:PORT/DATABASE?sslmode=…, or postgresql://…) or key=value pairs (host=… dbname=…); it is not repeated here, as it may hold a password")
	}
	host := cfg.Host
	if strings.HasPrefix(host, "/") {
		host = "socket " + host
	}
	return fmt.Sprintf("postgres user=%s host=%s port=%d database=%s", cfg.User, host, cfg.Port, cfg.Database), nil
}
