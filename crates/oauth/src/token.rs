//! Token requests through oauth2 on the guarded client: the code exchange,
//! refresh, and client credentials, each with the RFC 8707 `resource`.

use oauth2::basic::BasicClient;
use oauth2::{
    AuthType, AuthorizationCode, ClientId, ClientSecret, PkceCodeVerifier, RedirectUrl,
    RefreshToken, RequestTokenError, Scope, TokenResponse, TokenUrl,
};

use crate::challenge::split_scopes;
use crate::error::OAuthError;
use crate::grant::{AuthMethod, Grant};
use crate::http::OAuthHttp;
use executor_store::secrets::SecretString;

/// What a token endpoint gave, moved out of oauth2's types at once.
pub struct Issued {
    pub access_token: SecretString,
    pub refresh_token: Option<SecretString>,
    pub expires_in_s: Option<u64>,
    /// The scopes granted, when the answer names them.
    pub scopes: Option<Vec<String>>,
}

/// How one token request is made.
pub enum TokenGrant<'a> {
    Code {
        code: &'a str,
        verifier: &'a str,
        redirect_uri: &'a str,
    },
    Refresh {
        refresh_token: &'a SecretString,
    },
    ClientCredentials {
        scopes: &'a [String],
    },
}

pub async fn request_token(
    http: &OAuthHttp,
    grant: &Grant,
    client_secret: Option<&SecretString>,
    request: TokenGrant<'_>,
) -> Result<Issued, OAuthError> {
    let token_url = grant.server.token_endpoint.as_deref().ok_or_else(|| {
        OAuthError::Discovery("the authorization server has no token endpoint".into())
    })?;
    let mut client = BasicClient::new(ClientId::new(grant.client_id.clone()))
        .set_token_uri(TokenUrl::new(token_url.to_string()).map_err(|_| {
            OAuthError::Discovery(format!("the token endpoint {token_url} is not a URL"))
        })?)
        .set_auth_type(match grant.auth_method {
            AuthMethod::ClientSecretPost | AuthMethod::None => AuthType::RequestBody,
            AuthMethod::ClientSecretBasic => AuthType::BasicAuth,
        });
    if grant.auth_method != AuthMethod::None
        && let Some(secret) = client_secret
    {
        client = client.set_client_secret(ClientSecret::new(secret.expose().to_string()));
    }
    let resource = grant.resource.as_deref();
    let answer = match request {
        TokenGrant::Code {
            code,
            verifier,
            redirect_uri,
        } => {
            let client = client.set_redirect_uri(
                RedirectUrl::new(redirect_uri.to_string())
                    .map_err(|_| OAuthError::Setup(format!("{redirect_uri} is not a URL")))?,
            );
            let mut exchange = client
                .exchange_code(AuthorizationCode::new(code.to_string()))
                .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_string()));
            if let Some(resource) = resource {
                exchange = exchange.add_extra_param("resource", resource);
            }
            exchange.request_async(http).await
        }
        TokenGrant::Refresh { refresh_token } => {
            let token = RefreshToken::new(refresh_token.expose().to_string());
            let mut exchange = client.exchange_refresh_token(&token);
            if let Some(resource) = resource {
                exchange = exchange.add_extra_param("resource", resource);
            }
            exchange.request_async(http).await
        }
        TokenGrant::ClientCredentials { scopes } => {
            let mut exchange = client
                .exchange_client_credentials()
                .add_scopes(scopes.iter().cloned().map(Scope::new));
            if let Some(resource) = resource {
                exchange = exchange.add_extra_param("resource", resource);
            }
            exchange.request_async(http).await
        }
    };
    match answer {
        Ok(response) => Ok(Issued {
            access_token: response.access_token().secret().clone().into(),
            refresh_token: response.refresh_token().map(|t| t.secret().clone().into()),
            expires_in_s: response.expires_in().map(|d| d.as_secs()),
            scopes: response
                .scopes()
                .map(|scopes| scopes.iter().flat_map(|s| split_scopes(s)).collect()),
        }),
        Err(error) => Err(describe(error)),
    }
}

/// oauth2's error without what it may hold of the answer: `Parse` keeps the
/// raw body, which can hold tokens.
fn describe<E: std::error::Error>(
    error: RequestTokenError<E, oauth2::basic::BasicErrorResponse>,
) -> OAuthError {
    match error {
        RequestTokenError::ServerResponse(response) => OAuthError::Refused {
            error: response.error().to_string(),
            description: response
                .error_description()
                .map(|d| d.chars().take(200).collect()),
        },
        RequestTokenError::Request(e) => {
            OAuthError::Unreachable(format!("the token request failed: {e}"))
        }
        RequestTokenError::Parse(..) => {
            OAuthError::Unreachable("the token endpoint's answer is not a token response".into())
        }
        RequestTokenError::Other(_) => {
            OAuthError::Unreachable("the token endpoint answered something unexpected".into())
        }
    }
}
