package auth

// MaxAge is maxAge, for the tests.
var MaxAge = maxAge
