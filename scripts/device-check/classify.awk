# Classes one shader test's output (device-check's run.sh): awk -v rc=EXIT_CODE -f classify.awk LOG
# prints one line: "pass"; "layer N" when the test failed only on N validation messages that
# all name VK_KHR_cooperative_matrix, which Debian 12's validation layer (1.3.239) predates (it
# calls the extension's structures, SPIR-V capability and instructions unknown or invalid: the
# layer's limitation, not a kernel failure); else "FAIL WHY".
function khr_coopmat(m) {
    return m ~ /VK_KHR_cooperative_matrix|SPV_KHR_cooperative_matrix/ ||
        m ~ /CooperativeMatrix[A-Za-z]*KHR|COOPERATIVE_MATRIX_[A-Z_]*KHR/ ||
        m ~ /(^|[^0-9])100050600[012]([^0-9]|$)/ ||          # its VkStructureType values, unknown there
        m ~ /[Cc]apability[^0-9]*6022([^0-9]|$)/ ||            # Capability CooperativeMatrixKHR
        m ~ /Op(code)?[^0-9]*(4456|4457|4458|4459|4460)([^0-9]|$)/  # its five instructions
}
function close_msg() {
    if (inmsg) {
        n_msgs++
        if (khr_coopmat(msg)) n_khr += count; else if (other == "") other = substr(msg, 1, 300)
    }
    inmsg = 0; msg = ""
}
/validation layer reported [0-9]+ message/ {
    close_msg()
    inmsg = 1; msg = $0
    count = $0; sub(/.*validation layer reported /, "", count); sub(/ .*/, "", count); count += 0
    next
}
/^\[/ || /^Could not run test/ { close_msg() }
inmsg { msg = msg "\n" $0; next }
/: error: |^ERROR: |Test setup failed|Test failed/ { if (marker == "") marker = $0 }
END {
    close_msg()
    if (rc == 0) { print "pass"; exit }
    if (rc == 124 || rc == 137) { print "FAIL (cut at its time limit)"; exit }
    if (rc > 128) { print "FAIL (killed by signal " rc - 128 ")"; exit }
    if (marker != "") { gsub(/[|\n]/, " ", marker); print "FAIL (" rc "): " substr(marker, 1, 200); exit }
    if (other != "") { gsub(/[|\n]/, " ", other); print "FAIL (" rc "): " other; exit }
    if (n_msgs == 0) { print "FAIL (" rc ")"; exit }
    print "layer " n_khr
}
