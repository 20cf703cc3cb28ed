// A request body past the spool's threshold is sent from its file, as nginx sends one it wrote
// to client_body_temp_path: curl pulls it piece by piece (CURLOPT_READFUNCTION) and may rewind it
// (CURLOPT_SEEKFUNCTION), so each send of the request carries the same bytes from the first.
extension UpstreamTransfer {
    /// Fills `buffer` with the body's next bytes for curl's read callback: how many, 0 at the end,
    /// CURL_READFUNC_ABORT when the file cannot be read (the transfer fails; nothing is made up).
    func readRequestBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let file = requestFile else { return 0 }
        let n = file.read(into: buffer, at: requestFileOffset)
        guard n >= 0 else { return 0x1000_0000 }  // CURL_READFUNC_ABORT
        requestFileOffset += n
        return n
    }

    /// Moves the read position for a resend; only from the start (SEEK_SET) within the body.
    func seekRequestBody(to offset: Int, origin: Int32) -> Bool {
        guard let file = requestFile, origin == 0, offset >= 0, offset <= file.count else { return false }
        requestFileOffset = offset
        return true
    }
}
