-- After connecting with ssl-mode=required or a verify mode: the cipher of the session's TLS
-- (empty without TLS, and the connection is then refused).
SHOW SESSION STATUS LIKE 'Ssl_cipher'
