"""Listener security: TLS from PEM files, SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the
principal each connection authenticates as. The request handlers see only the principal
(``ClientInfo.principal``), never how it was authenticated."""
