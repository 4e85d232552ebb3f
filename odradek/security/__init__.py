"""Security building blocks, sans-IO: nothing here reads a socket or a config file.

- ``sasl``: the server side of SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER as small state
  machines (``server.step(client_bytes) -> server_bytes``) and ``AuthenticationError`` carrying
  the message Kafka sends in SaslAuthenticate; ``create_server`` picks one by mechanism name.
- ``authenticator``: ``SaslConnection``, one connection's SASL state (which requests are allowed
  before, during and after authentication, SaslHandshake/SaslAuthenticate answers, KIP-368
  re-authentication and session expiry). The connection drives it; it drives the mechanisms.
- ``scram``: Kafka's ScramCredential, its ZooKeeper string form, and the SCRAM messages.
- ``credentials``: the ``CredentialStore`` protocol, an in-memory store, and the
  AlterUserScramCredentials / DescribeUserScramCredentials semantics over a store.
- ``oauthbearer``: the RFC 7628 client initial response, Kafka's unsecured JWS validator and the
  pluggable ``TokenValidator``.
- ``jaas``: Kafka's ``sasl.jaas.config`` parser and the PLAIN user table.
- ``principal``: ``ssl.principal.mapping.rules`` (Kafka's SslPrincipalMapper) and the RFC 2253
  subject of a peer certificate.
- ``jks``: Java KeyStore files (Kafka's default ``ssl.keystore.type``), read into PEM.
- ``acl*``: ACL types, authorizer and storage (a separate owner).
"""
