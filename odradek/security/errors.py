"""The error a SASL mechanism raises, with the message Kafka would send to the client."""

from __future__ import annotations

from odradek.wire.errors import ErrorCode


class AuthenticationError(Exception):
    """A failed SASL exchange.

    Kafka has two kinds of failure: a ``SaslAuthenticationException``, whose message is sent to
    the client as is (``public=True``), and a ``SaslException``, whose message could reveal
    whether a user exists, so the client only gets "Authentication failed during authentication
    due to invalid credentials with SASL mechanism <M>" (``public=False``; ``str(error)`` keeps
    the detail for a debug log). ``error_code`` is SASL_AUTHENTICATION_FAILED except for a token
    after the exchange ended (ILLEGAL_SASL_STATE). Either way the connection is closed after the
    SaslAuthenticate response, as Kafka does.
    """

    def __init__(
        self,
        message: str,
        *,
        mechanism: str = "",
        public: bool = True,
        error_code: ErrorCode = ErrorCode.SASL_AUTHENTICATION_FAILED,
    ) -> None:
        super().__init__(message)
        self.mechanism = mechanism
        self.public = public
        self.error_code = error_code

    def client_message(self, *, reauthenticating: bool = False) -> str:
        """The SaslAuthenticate ``error_message``; ``reauthenticating`` for a KIP-368
        re-authentication, which Kafka words "during re-authentication"."""
        if self.public:
            return str(self)
        return failed_message(self.mechanism, reauthenticating=reauthenticating)


def failed_message(mechanism: str, *, reauthenticating: bool = False) -> str:
    """Kafka's SaslServerAuthenticator message for a failure whose detail is not disclosed."""
    during = "re-authentication" if reauthenticating else "authentication"
    return (
        f"Authentication failed during {during} due to invalid credentials with SASL mechanism "
        f"{mechanism}"
    )
