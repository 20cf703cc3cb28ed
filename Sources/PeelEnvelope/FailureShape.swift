// The error bodies common frameworks answer with (shared/DIALECTS.md, "Failure shapes"), and one
// sample of each, written as its frameworks answer, for `peel dialects`, the README and the tests.

/// A well-known failure body, in the order they are tried: the most specific first.
public enum FailureShape: String, Sendable, CaseIterable {
    /// RFC 9457 / RFC 7807 problem details (`application/problem+json`, or `type`/`title` with
    /// `status`/`detail`); ASP.NET Core's validation problem adds an `errors` map.
    case problem
    /// `{"error": {"code", "message", "details"}}`: Google AIP-193, Microsoft REST guidelines, Stripe.
    case errorObject = "error-object"
    /// OAuth 2.0 errors (RFC 6749 §5.2, RFC 6750 §3.1): a registered `error` code or `error_description`.
    case oauth
    /// Spring Boot's default error attributes (`timestamp`, `status`, `error`, `path`), with binding `errors`.
    case spring
    /// go-kratos: `code` (the HTTP status), `reason`, `message`, `metadata`.
    case kratos
    /// Flask's documented JSON error handler: `code` (the HTTP status), `name`, `description`.
    case flask
    /// FastAPI (pydantic) validation: `detail` is a list of `{loc, msg, type}`.
    case fastapi
    /// Laravel and Rails: `errors` maps fields to messages, with Laravel's `message`.
    case laravel
    /// NestJS and Fastify: `statusCode`, `message` (a list for class-validator), `error`.
    case nestjs
    /// `errors` lists (JSON:API, GraphQL, express-validator): the first error's message and code.
    case errorsArray = "errors-array"
    /// Django REST framework: `{"detail": …}`, or a map of fields to message lists.
    case drf
    /// A bare `message` (or `msg`) member, with a `code` beside it when there is one.
    case message
    /// A bare `error` member that is a string.
    case error
}

extension FailureShape {
    /// A failure body shaped as this shape's frameworks write it, for `peel dialects` and its tests.
    public var sample: DialectSample {
        switch self {
        case .problem:
            DialectSample(rawValue, ##"{"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.","status":403,"detail":"Your current balance is 30, but that costs 50.","instance":"/account/12345/msgs/abc","balance":30}"##, status: 403)
        case .errorObject:
            DialectSample(rawValue, ##"{"error":{"code":400,"message":"Invalid book.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"book.title","description":"Title must not be empty."}]}]}}"##, status: 400)
        case .oauth:
            DialectSample(rawValue, ##"{"error":"invalid_grant","error_description":"The refresh token has expired"}"##, status: 400)
        case .spring:
            DialectSample(rawValue, ##"{"timestamp":"2026-12-05T03:10:00.000+00:00","status":400,"error":"Bad Request","errors":[{"defaultMessage":"must not be blank","objectName":"userDto","field":"email","code":"NotBlank"}],"path":"/api/users"}"##, status: 400)
        case .kratos:
            DialectSample(rawValue, ##"{"code":404,"reason":"USER_NOT_FOUND","message":"user 42 not found","metadata":{"uid":"42"}}"##, status: 404)
        case .flask:
            DialectSample(rawValue, ##"{"code": 404, "name": "Not Found", "description": "The requested URL was not found on the server."}"##, status: 404)
        case .fastapi:
            DialectSample(rawValue, ##"{"detail":[{"type":"missing","loc":["body","email"],"msg":"Field required","input":{}}]}"##, status: 422)
        case .laravel:
            DialectSample(rawValue, ##"{"message":"The email field is required.","errors":{"email":["The email field is required."],"items.0.name":["The items.0.name field is required."]}}"##, status: 422)
        case .nestjs:
            DialectSample(rawValue, ##"{"message":["email must be an email"],"error":"Bad Request","statusCode":400}"##, status: 400)
        case .errorsArray:
            DialectSample(rawValue, ##"{"errors":[{"status":"422","code":"invalid","source":{"pointer":"/data/attributes/firstName"},"detail":"First name must contain at least two characters."}]}"##, status: 422)
        case .drf:
            DialectSample(rawValue, ##"{"email":["Enter a valid email address."],"non_field_errors":["The two passwords do not match."]}"##, status: 400)
        case .message:
            DialectSample(rawValue, ##"{"message":"This email is already registered","code":"EMAIL_TAKEN"}"##, status: 409)
        case .error:
            DialectSample(rawValue, ##"{"error":"Not Found"}"##, status: 404)
        }
    }
}
