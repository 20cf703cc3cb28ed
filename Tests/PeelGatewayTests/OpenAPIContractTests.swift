import Foundation
@testable import PeelGateway
import PeelEnvelope
import XCTest

/// `peel openapi`'s transformation on small documents, one rule each (issue 34); the real-shaped
/// springdoc, springfox, WeChat and FastAPI documents are checked by scripts/openapi.sh with
/// openapi-spec-validator.
final class OpenAPIContractTests: XCTestCase {
    private func json(_ text: String) throws -> ConfigJSON {
        let bytes = Array(text.utf8)
        XCTAssertTrue(JSONScanner.validate(bytes), text)
        return try ConfigJSON.parse(bytes).get()
    }

    private func transformed(_ text: String, dialect: Dialect, passthrough: [String] = []) throws -> (ConfigJSON, [String]) {
        var envelope = EnvelopeConfig()
        envelope.dialect = dialect
        envelope.passthroughPaths = passthrough
        var contract = OpenAPIContract(envelope: envelope, reachabilityPath: "/_peel/reachability")
        let doc = try contract.transform(try json(text))
        return (doc, contract.report)
    }

    /// An OpenAPI 3.0 document with one GET on /x answering `schema`, and `schemas` as components.
    private func document(_ schema: String, schemas: String = "{}") -> String {
        ##"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {"responses": {"200": {"description": "OK", "content": {"*/*": {"schema": \##(schema)}}}, "404": {"description": "Not Found"}}}}}, "components": {"schemas": \##(schemas)}}"##
    }

    func testAnEnvelopeThroughRefAndAllOf_becomesItsPayload_asApplicationJSON() throws {
        let schemas = ##"{"Base": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}}, "Item": {"type": "object", "properties": {"id": {"type": "integer"}}}, "Wrapped": {"allOf": [{"$ref": "#/components/schemas/Base"}, {"type": "object", "properties": {"data": {"$ref": "#/components/schemas/Item"}}}]}}"##
        let (doc, report) = try transformed(document(##"{"$ref": "#/components/schemas/Wrapped"}"##, schemas: schemas), dialect: .peel)
        let ok = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"]?["200"])
        // `data` is not required: the envelope may come without it, and Peel then answers `null` or 204.
        let item = ConfigJSON.obj(["$ref": .string("#/components/schemas/Item")])
        XCTAssertEqual(ok["content"], .obj(["application/json": .obj(["schema": .obj(["anyOf": .array([item, .obj(["type": .string("null")])])])])]))
        XCTAssertEqual(report, [])
        let names = doc["components"]?["schemas"]?.members.map(\.name)
        XCTAssertEqual(names, ["Item", "Problem"], "the envelopes nothing references any more are gone")
        XCTAssertEqual(doc["openapi"], .string("3.1.0"))
    }

    func testTheUpstreamsFailures_andPeelsOwn_areTheProblem() throws {
        let (doc, _) = try transformed(document(##"{"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {"type": "string"}}}"##),
                                       dialect: .peel)
        let responses = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"])
        let problem = ConfigJSON.obj(["application/problem+json": .obj(["schema": .obj(["$ref": .string("#/components/schemas/Problem")])])])
        for status in ["404", "400", "401", "413", "422", "502", "503", "504", "default"] {
            XCTAssertEqual(responses[status]?["content"], problem, status)
        }
        XCTAssertEqual(responses["404"]?["description"], .string("Not Found"), "the upstream's words stay")
        XCTAssertNotNil(responses["401"]?["headers"]?["WWW-Authenticate"])
        XCTAssertNotNil(responses["503"]?["headers"]?["Retry-After"])
    }

    func testWhatCannotBeUnwrapped_isLeftMarkedAndReported() throws {
        let untypedMap = ##"{"type": "object", "additionalProperties": {"type": "object"}}"##
        let (doc, report) = try transformed(document(untypedMap), dialect: .ruoyi)
        let media = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"]?["200"]?["content"]?["*/*"])
        XCTAssertEqual(media["x-peel-unwrap"], .string("untyped"))
        XCTAssertEqual(media["schema"], try json(untypedMap))
        XCTAssertEqual(report.count, 1)
        XCTAssertTrue(report[0].hasPrefix("GET /x 200"), report[0])

        let barePayload = ##"{"type": "object", "properties": {"code": {"type": "integer"}, "msg": {"type": "string"}, "data": {"type": "object"}}}"##
        let (_, bareReport) = try transformed(document(barePayload), dialect: .yudao)
        XCTAssertEqual(bareReport.count, 1, "a payload declared as a bare object")
    }

    func testAnotherDialectsEnvelope_isNotUnwrapped() throws {
        let yudao = ##"{"type": "object", "properties": {"code": {"type": "integer"}, "msg": {"type": "string"}, "data": {"type": "string"}}}"##
        let (doc, report) = try transformed(document(yudao), dialect: .peel)
        XCTAssertNotNil(doc["paths"]?["/x"]?["get"]?["responses"]?["200"]?["content"]?["*/*"], "peel's envelope has `message`, not `msg`")
        XCTAssertEqual(report.count, 1)
    }

    func testPassthroughPaths_keepTheirAnswers_andDeclareOnlyWhatPeelSaysWhenTheUpstreamDoesNot() throws {
        let (doc, _) = try transformed(document(##"{"type": "string", "format": "binary"}"##), dialect: .peel, passthrough: ["/x"])
        let responses = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"])
        XCTAssertEqual(responses.members.map(\.name), ["200", "404", "502", "503", "504"])
        XCTAssertNotNil(responses["200"]?["content"]?["*/*"])
        XCTAssertEqual(responses["404"]?["content"], nil, "passed through as the upstream answers it")
    }

    func testSpringfoxNames_areCleaned_andEveryReferenceFollows() throws {
        let schemas = ##"{"R«List«User»»": {"type": "object", "properties": {"code": {"type": "integer"}, "msg": {"type": "string"}, "data": {"type": "array", "items": {"$ref": "#/components/schemas/User"}}}}, "User": {"type": "object", "properties": {"name": {"type": "string"}}}, "R_List_User": {"type": "object"}}"##
        let (doc, _) = try transformed(document(##"{"$ref": "#/components/schemas/R«List«User»»"}"##, schemas: schemas), dialect: .ruoyi)
        XCTAssertEqual(ComponentNames.cleaned("CommonResult«PageResult«UserRespVO»»"), "CommonResult_PageResult_UserRespVO")
        let ok = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"]?["200"]?["content"]?["application/json"]?["schema"])
        XCTAssertEqual(ok["properties"]?["data"]?["items"], .obj(["$ref": .string("#/components/schemas/User")]))
        let cleaned = ComponentNames.clean(try json(document("{}", schemas: schemas)))
        XCTAssertEqual(cleaned["components"]?["schemas"]?.members.map(\.name), ["R_List_User_2", "User", "R_List_User"],
                       "a cleaned name never takes one the document already has")
    }

    func testOpenAPI30Spellings_become31s() throws {
        let schema = try json(##"{"type": "object", "properties": {"a": {"type": "string", "nullable": true}, "b": {"type": "integer", "minimum": 0, "exclusiveMinimum": true}, "c": {"$ref": "#/components/schemas/X", "nullable": true}}}"##)
        let out = SchemaDialect.schema(schema)
        XCTAssertEqual(out["properties"]?["a"]?["type"], .array([.string("string"), .string("null")]))
        XCTAssertEqual(out["properties"]?["b"]?["exclusiveMinimum"], .number("0"))
        XCTAssertNil(out["properties"]?["b"]?["minimum"])
        XCTAssertEqual(out["properties"]?["c"]?["anyOf"]?.arrayCount, 2)
    }

    func testAnUpstreamSchemaNamedProblem_isKept_andPeelsIsPeelProblem() throws {
        let schemas = ##"{"Problem": {"type": "object", "properties": {"mine": {"type": "string"}}}}"##
        let (doc, _) = try transformed(document(##"{"$ref": "#/components/schemas/Problem"}"##, schemas: schemas), dialect: .rest)
        XCTAssertEqual(doc["components"]?["schemas"]?["Problem"]?["properties"]?["mine"]?["type"], .string("string"))
        XCTAssertNotNil(doc["components"]?["schemas"]?["PeelProblem"])
        XCTAssertEqual(doc["paths"]?["/x"]?["get"]?["responses"]?["404"]?["content"]?["application/problem+json"]?["schema"],
                       .obj(["$ref": .string("#/components/schemas/PeelProblem")]))
    }

    func testASchemaThatRefersToItself_isReadOnce_notEndlessly() throws {
        let schemas = ##"{"A": {"allOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/A"}]}}"##
        let started = Date()
        let (doc, report) = try transformed(document(##"{"$ref": "#/components/schemas/A"}"##, schemas: schemas), dialect: .peel)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "4^32 walks")
        XCTAssertEqual(report.count, 1, "not the envelope: declared as written")
        XCTAssertNotNil(doc["components"]?["schemas"]?["A"])
    }

    func testAPayloadTheEnvelopeMayLack_isNullable_andTheOperationMayAnswer204() throws {
        let (doc, _) = try transformed(document(##"{"type": "object", "properties": {"code": {"type": "integer"}, "msg": {"type": "string"}, "data": {"type": "boolean"}}}"##),
                                       dialect: .yudao)
        let responses = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"])
        XCTAssertEqual(responses["200"]?["content"]?["application/json"]?["schema"],
                       .obj(["anyOf": .array([.obj(["type": .string("boolean")]), .obj(["type": .string("null")])])]))
        XCTAssertNotNil(responses["204"])
        let (required, _) = try transformed(document(##"{"type": "object", "required": ["code", "data"], "properties": {"code": {"type": "integer"}, "msg": {"type": "string"}, "data": {"type": "boolean"}}}"##),
                                            dialect: .yudao)
        let r = try XCTUnwrap(required["paths"]?["/x"]?["get"]?["responses"])
        XCTAssertEqual(r["200"]?["content"]?["application/json"]?["schema"], .obj(["type": .string("boolean")]))
        XCTAssertNil(r["204"])
    }

    func testRedirects_OPTIONS_andPassthroughMediaTypes_keepWhatTheUpstreamDeclared() throws {
        let text = ##"{"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {"responses": {"302": {"description": "moved", "headers": {"Location": {"schema": {"type": "string"}}}}, "200": {"description": "OK", "content": {"text/csv": {"schema": {"type": "string"}}}}}}, "options": {"responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object", "properties": {"code": {"type": "integer"}, "message": {"type": "string"}, "data": {"type": "string"}}}}}}}}}}}"##
        let (doc, _) = try transformed(text, dialect: .peel)
        let get = try XCTUnwrap(doc["paths"]?["/x"]?["get"]?["responses"])
        XCTAssertNotNil(get["302"]?["headers"]?["Location"], "a redirect is relayed, not a problem")
        XCTAssertNotNil(get["200"]?["content"]?["text/csv"])
        let options = try XCTUnwrap(doc["paths"]?["/x"]?["options"]?["responses"])
        XCTAssertEqual(options.members.map(\.name), ["200"], "Peel passes OPTIONS through unjudged")
    }

    func testAReferenceIntoAComponent_keepsTheComponent() throws {
        let schemas = ##"{"User": {"type": "object", "properties": {"id": {"type": "integer"}}}, "Order": {"type": "object", "properties": {"user": {"$ref": "#/components/schemas/User/properties/id"}}}}"##
        let (doc, _) = try transformed(document(##"{"$ref": "#/components/schemas/Order"}"##, schemas: schemas), dialect: .rest)
        XCTAssertNotNil(doc["components"]?["schemas"]?["User"])
        XCTAssertEqual(ComponentNames.split("#/components/schemas/R%C2%ABUser%C2%BB/properties/id")?.name, "R«User»")
        XCTAssertEqual(ComponentNames.split("#/components/schemas/User/properties/id")?.rest, "/properties/id")
    }

    func testADocumentThatIsNoOpenAPI_isRefused() throws {
        var contract = OpenAPIContract(envelope: EnvelopeConfig(), reachabilityPath: nil)
        XCTAssertThrowsError(try contract.transform(try json(##"{"info": {}}"##)))
        XCTAssertThrowsError(try contract.transform(try json(##"{"swagger": "1.2"}"##)))
    }
}

private extension ConfigJSON {
    var arrayCount: Int? {
        if case .array(let a) = self { return a.count }
        return nil
    }
}
